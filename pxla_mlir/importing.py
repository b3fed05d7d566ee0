"""The import stage both maps share: jax's lowering of a traced body becomes
a module in "pxla form".

Each map's importer (:mod:`.pmaps.importer`, :mod:`.xmaps.importer`) lowers
its body with jax's own rules (``jax_internals.lower_per_device`` for a
per-device program, ``lower_global`` for the global view), then uses the
helpers here to name the module and describe its layout with ``pxla.*``
attributes (:mod:`.ir.pxla_attrs`): the mesh on the module, the mesh axes
splitting each argument and result on ``@main``. The ops stay as jax emitted
them (StableHLO, CHLO, placeholder custom calls): legalization to MHLO is the
first step of every map pipeline, so ``pxla-opt --pass-pipeline=...`` on the
pxla form replays the whole lowering.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping, Sequence

from jaxlib.mlir import ir

from .ir import ir_utils, pxla_attrs

Dims = Sequence[Sequence[str]]  # mesh axes splitting each dimension of one value


@dataclasses.dataclass
class Imported:
    module: ir.Module  # pxla form, in the MLIR context jax lowered it in
    keepalive: Any  # what the executable must keep alive (jax's lowering keepalive)
    host_callbacks: Sequence


def imported(lowering) -> Imported:
    """An Imported from jax's ``LoweringResult`` (worked on in place: no print/parse round trip)."""
    return Imported(lowering.module, lowering.keepalive, lowering.host_callbacks)


def module_name(kind: str, name: str) -> str:
    """``pmap_step``, ``xmap_f``: the module's symbol name (identifier characters only)."""
    return f"{kind}_" + re.sub(r"\W", "_", name)


def mesh_label(name, index: int, reserved: Sequence[str] = ()) -> str:
    """A mesh axis name as it appears in ``pxla.mesh`` (identifiers only)."""
    if isinstance(name, str) and re.fullmatch(r"[A-Za-z_]\w*", name) and name not in reserved:
        return name
    return f"axis{index}"


def main_function(module: ir.Module) -> ir.Operation:
    main = ir_utils.find_function(module.operation, "main")
    if main is None:
        raise ValueError("jax's lowering has no func.func @main")
    return main


def annotate(module: ir.Module, mesh: Mapping[str, int], key: str, in_dims: Sequence[Dims],
             out_dims: Sequence[Dims]) -> None:
    """Writes ``pxla.mesh`` on the module and ``key`` (``pxla.dims`` for a
    global signature, ``pxla.tile_dims`` for a per-device one) on every
    argument and result of @main, keeping their other attributes."""
    with module.context, module.operation.location:
        pxla_attrs.set_mesh(module.operation, mesh)
        main = main_function(module)
        for attrs_key, dims in (("arg_attrs", in_dims), ("res_attrs", out_dims)):
            dicts = pxla_attrs.boundary_attrs(main, attrs_key)
            for entries, value_dims in zip(dicts, dims):
                entries[key] = pxla_attrs.dims_attr(value_dims)
            ir_utils.set_boundary_attrs(main, attrs_key, dicts)
