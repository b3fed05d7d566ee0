"""pxla-convert-op-shardings-to-sdy: op-level mhlo.sharding strings to the sdy.sharding Shardy reads.

Host callbacks (jax.debug.print, pure_callback, io_callback, ...) are the
ops jax gives a sharding of their own: ``{manual}`` in per-device code (every
device calls back) and ``{maximal device=N}`` in global code (device N calls
back once). In the Shardy form XLA ignores ``mhlo.sharding``, and a side
effect without a sharding fails to compile, so this pass writes what jax
writes with Shardy on, one entry per result (at least one):

* ``{manual}`` (only valid inside per-device code: the module must have an
  ``sdy.manual_computation``) → replicated on an empty mesh,
  ``#sdy.sharding_per_value<[<mesh<[]>, [{}, ...]>]>``;
* ``{maximal device=N}`` → ``#sdy.sharding_per_value<[<mesh<[], device_ids=[N]>, []>]>``;
* ``{replicated}`` → dropped.

Any other op-level sharding is an error: Shardy needs it as a sharding on
the mesh, which the pxla form does not say.

Before::

    %0 = mhlo.custom_call @xla_ffi_python_cpu_callback(%x) {has_side_effect = true,
        mhlo.sharding = "{maximal device=0}"} : (tensor<2xf32>) -> ()

After::

    %0 = mhlo.custom_call @xla_ffi_python_cpu_callback(%x) {has_side_effect = true,
        sdy.sharding = #sdy.sharding_per_value<[<mesh<[], device_ids=[0]>, []>]>} : (tensor<2xf32>) -> ()

Example::

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-convert-op-shardings-to-sdy)'
"""

from __future__ import annotations

import dataclasses
import re

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import ir_utils, shardy
from pxla_mlir.mlir.core.pxla_attrs import string_value
from pxla_mlir.mlir.pass_infra import ModulePass, PassError

_MAXIMAL = re.compile(r"^\{maximal device=(\d+)\}$")


@dataclasses.dataclass(frozen=True)
class ConvertOpShardingsToSdyPass(ModulePass):
    argument = "pxla-convert-op-shardings-to-sdy"
    summary = "Turn op-level mhlo.sharding ({manual}, {maximal device=N}; host callbacks) into sdy.sharding"

    def run(self, module):
        ops = ir_utils.walk(module)
        manual_code = any(op.name == shardy.MANUAL_COMPUTATION for op in ops)
        for op in ops:
            if op.name == "func.func" or shardy.GSPMD_SHARDING not in op.attributes:
                continue
            text = string_value(op.attributes[shardy.GSPMD_SHARDING], shardy.GSPMD_SHARDING, op)
            maximal = _MAXIMAL.match(text)
            if text == "{replicated}":
                new = None
            elif text == "{manual}":
                if not manual_code:
                    raise PassError(op, "mhlo.sharding = \"{manual}\" on an op of a module without an "
                                        "sdy.manual_computation; per-device code must be inside one (run "
                                        "pxla-expand-manual-computation first)")
                new = ", ".join(f"<mesh<[]>, [{', '.join(['{}'] * rank)}]>" for rank in _ranks(op))
            elif maximal:
                new = ", ".join(f"<mesh<[], device_ids=[{maximal[1]}]>, []>" for _ in _ranks(op))
            else:
                raise PassError(op, f"op-level mhlo.sharding {text!r} has no Shardy form here (only {{manual}}, "
                                    f"{{maximal device=N}} and {{replicated}} do); use sharding-dialect=gspmd")
            del op.attributes[shardy.GSPMD_SHARDING]
            if new is not None:
                op.attributes[shardy.SHARDING] = ir.Attribute.parse(f"#sdy.sharding_per_value<[{new}]>")


def _ranks(op) -> list[int]:
    """One entry per result (Shardy wants at least one, as jax writes it)."""
    ranks = [ir.RankedTensorType(r.type).rank if isinstance(r.type, ir.RankedTensorType) else 0 for r in op.results]
    return ranks or [0]
