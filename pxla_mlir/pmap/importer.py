"""Import: a pmapped jaxpr to MHLO in "pxla form".

The module is the *per-device* program of a top-level pmap over
``axis_size * inner`` devices (``inner``: devices nested pmaps need):

* each mapped argument/result is a device's tile with a size-1 dimension at
  its in/out axis (so a device buffer is exactly one slice of the global
  array), a broadcast one is the whole value; ``pxla.tile_dims`` on @main
  and ``pxla.mesh`` on the module say so;
* jax's own lowering rules produce the body (collectives in manual SPMD
  form: partition ids, channels, global device ids), nested pmaps become
  ``@pxla.shard`` / ``@pxla.unshard`` placeholders;
* StableHLO and CHLO are legalized to MHLO.

The pxla-pmap-pipeline then turns it into replica- or partition-mode MHLO.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import threading
from typing import Any, Sequence

import jax
from jaxlib.mlir import ir

from .. import ir_utils
from ..context import make_context
from ..jax_internals import core, lower_per_device, lu, pe
from ..pass_infra import Pipeline, run_pipeline
from ..pipelines import LEGALIZE_TO_MHLO
from .primitive import REP_AXIS, replicas_needed

_lock = threading.Lock()


@functools.cache
def shared_context() -> ir.Context:
    """The MLIR context every pmap module lives in."""
    return make_context()


@functools.cache
def _parsed_pipeline(text: str) -> Pipeline:
    return Pipeline.parse(text, shared_context())


@dataclasses.dataclass
class Imported:
    module: ir.Module  # pxla form, in shared_context()
    mesh_names: tuple  # jax axis names of the module's devices (the pmap axis, then REP_AXIS)
    mesh_sizes: tuple
    keepalive: Any
    host_callbacks: Sequence

    @property
    def num_devices(self) -> int:
        n = 1
        for s in self.mesh_sizes:
            n *= s
        return n


def mesh_axis_label(axis_name, index: int = 0) -> str:
    """The pmap axis as a pxla.mesh name (identifiers only)."""
    if isinstance(axis_name, str) and re.fullmatch(r"[A-Za-z_]\w*", axis_name) and axis_name != REP_AXIS:
        return axis_name
    return f"axis{index}"


def _tile_aval(aval, axis):
    if axis is None:
        return aval
    shape = list(aval.shape)
    shape[axis] = 1
    return core.ShapedArray(tuple(shape), aval.dtype, weak_type=aval.weak_type)


def per_device_jaxpr(jaxpr: core.ClosedJaxpr, *, axis_name, axis_size, in_axes, out_axes,
                     global_avals) -> core.ClosedJaxpr:
    """The program one device runs: unit-dim tiles in, unit-dim tiles out."""

    def per_device(*tiles):
        xs = [jax.lax.squeeze(t, (a,)) if a is not None else t for t, a in zip(tiles, in_axes)]
        outs = core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *xs)  # stages nested pmaps again
        return [jax.lax.expand_dims(o, (a,)) if a is not None else o for o, a in zip(outs, out_axes)]

    tile_avals = [_tile_aval(av, a) for av, a in zip(global_avals, in_axes)]
    with core.extend_axis_env_nd([(axis_name, axis_size)]):
        traced, _, consts = pe.trace_to_jaxpr_dynamic(
            lu.wrap_init(per_device, debug_info=jaxpr.jaxpr.debug_info), tile_avals)
    return core.ClosedJaxpr(traced, consts)


def import_pmap(jaxpr: core.ClosedJaxpr, *, axis_name, axis_size: int, in_axes, out_axes, name: str,
                global_avals, donated, platform: str) -> Imported:
    inner = replicas_needed(jaxpr)
    names, sizes = (axis_name,), (axis_size,)
    if inner > 1:
        names, sizes = names + (REP_AXIS,), sizes + (inner,)
    top = per_device_jaxpr(jaxpr, axis_name=axis_name, axis_size=axis_size, in_axes=in_axes,
                           out_axes=out_axes, global_avals=global_avals)
    module_name = "pmap_" + re.sub(r"\W", "_", name)
    with core.extend_axis_env_nd([(axis_name, axis_size)]):
        lowered = lower_per_device(top, names, sizes, platform=platform, name=module_name, donated=donated)
    text = lowered.module.operation.get_asm(enable_debug_info=True)
    label = mesh_axis_label(axis_name)
    mesh_text = ",".join([f"{label}={axis_size}"] + ([f"{REP_AXIS}={inner}"] if inner > 1 else []))
    with _lock:
        ctx = shared_context()
        with ctx:
            module = ir.Module.parse(text)
        run_pipeline(module, _parsed_pipeline(f"builtin.module({LEGALIZE_TO_MHLO})"), reproducer=False)
        with ctx, module.operation.location:
            _annotate(module, mesh_text, label, in_axes, out_axes)
    return Imported(module, names, sizes, lowered.keepalive, lowered.host_callbacks)


def _annotate(module: ir.Module, mesh_text: str, label: str, in_axes, out_axes) -> None:
    op = module.operation
    op.attributes["pxla.mesh"] = ir.StringAttr.get(mesh_text)
    main = next(f for f in ir_utils.functions(op) if ir_utils.str_attr(f, "sym_name") == "main")
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    for key, axes, types in (("arg_attrs", in_axes, ftype.inputs), ("res_attrs", out_axes, ftype.results)):
        old = list(ir.ArrayAttr(main.attributes[key])) if key in main.attributes else [ir.DictAttr.get({})] * len(types)
        new = []
        for d, a, t in zip(old, axes, types):
            entries = {x.name: x.attr for x in ir.DictAttr(d)}
            rank = ir.RankedTensorType(t).rank
            dims = [ir.ArrayAttr.get([ir.StringAttr.get(label)] if i == a else []) for i in range(rank)]
            entries["pxla.tile_dims"] = ir.ArrayAttr.get(dims)
            new.append(ir.DictAttr.get(entries))
        main.attributes[key] = ir.ArrayAttr.get(new)
