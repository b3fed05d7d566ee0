"""The import stage both maps share: jax's lowering of a traced body becomes
a module in "pxla form".

Each map's importer (:mod:`pxla_mlir.pmaps.importer`, :mod:`pxla_mlir.xmaps.importer`) lowers
its body with jax's own rules (``lowering.lower_per_device`` for a
per-device program, ``lower_global`` for the global view), then uses the
helpers here to name the module and describe its layout with ``pxla.*``
attributes (:mod:`pxla_mlir.mlir.core.pxla_attrs`): the mesh on the module, the mesh axes
splitting each argument and result on ``@main``. The ops stay as jax emitted
them (StableHLO, CHLO, placeholder custom calls): legalization to MHLO is the
first step of every map pipeline, so ``pxla-opt --pass-pipeline=...`` on the
pxla form replays the whole lowering.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func, stablehlo

from pxla_mlir.jaxbridge.stablehlo_lowering import refined_module
from pxla_mlir.mlir.core import boundaries, ir_utils, pxla_attrs

Dims = Sequence[Sequence[str]]  # mesh axes splitting each dimension of one value


@dataclasses.dataclass
class Imported:
    module: ir.Module  # pxla form, in the MLIR context jax lowered it in
    keepalive: Any  # what the executable must keep alive (jax's lowering keepalive)
    host_callbacks: Sequence


def imported(lowering, *, per_device: bool = True) -> Imported:
    """An Imported from jax's ``LoweringResult`` (worked on in place: no
    print/parse round trip), with a channel per collective. Host callbacks stay in the module: their ordering
    tokens become internal to @main, and each gets the sharding jax's ordered
    form forgets ({manual}: every device calls back, for a per-device
    program; {maximal device=0} for a global one). Shape-polymorphic code is
    refined to static shapes first, as jax does before compiling."""
    module = refined_module(lowering)  # a jax.export'ed function in the body has dynamic shapes until refined
    with module.context, module.operation.location:
        _unique_channels(module)
        _internalize_tokens(main_function(module))  # ordered effects, with or without host callbacks
        if lowering.host_callbacks:
            _shard_callbacks(module, "{manual}" if per_device else "{maximal device=0}")
    return Imported(module, lowering.keepalive, lowering.host_callbacks)


def _unique_channels(module: ir.Module) -> None:
    """jax gives the collectives of one psum of several values one channel;
    XLA without its SPMD partitioner (a one-device program) needs a channel
    per op, so every op gets its own, numbered in order."""
    count = 0
    for op in ir_utils.walk(module.operation):
        if "channel_handle" in op.attributes:
            count += 1
            old = stablehlo.ChannelHandle(op.attributes["channel_handle"])
            op.attributes["channel_handle"] = stablehlo.ChannelHandle.get(count, old.channel_type)


_CALLBACK_TARGET = re.compile(r"xla_ffi(_partitioned)?_python_\w+_callback")


def _shard_callbacks(module: ir.Module, sharding: str) -> None:
    for op in ir_utils.walk(module.operation):
        if op.name.endswith(".custom_call") and "mhlo.sharding" not in op.attributes:
            target = op.attributes.get("call_target_name")
            if isinstance(target, ir.StringAttr) and _CALLBACK_TARGET.fullmatch(target.value):
                op.attributes["mhlo.sharding"] = ir.StringAttr.get(sharding)


def _internalize_tokens(main: ir.Operation) -> None:
    """jax threads ordered effects (``io_callback(ordered=True)``) through
    token arguments and results of @main (marked ``jax.token``); ours are made
    inside (``after_all()``) and dropped at the end: order holds within one
    execution, and each device runs its launches in order."""
    args = pxla_attrs.boundary_attrs(main, "arg_attrs")
    results = pxla_attrs.boundary_attrs(main, "res_attrs")
    token_args = [i for i, a in enumerate(args) if "jax.token" in a]
    token_results = {i for i, a in enumerate(results) if "jax.token" in a}
    if not token_args and not token_results:
        return
    block = main.regions[0].blocks[0]
    with ir.InsertionPoint.at_block_begin(block):
        for i in reversed(token_args):
            block.arguments[i].replace_all_uses_with(stablehlo.AfterAllOp([]).result)
            block.erase_argument(i)
    ret = block.operations[len(block.operations) - 1]
    kept = [v for i, v in enumerate(ret.operands) if i not in token_results]
    with ir.InsertionPoint(ret):
        func.ReturnOp(kept)
    ret.erase()
    ftype = pxla_attrs.function_type(main)
    inputs = [t for i, t in enumerate(ftype.inputs) if i not in token_args]
    outputs = [t for i, t in enumerate(ftype.results) if i not in token_results]
    main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, outputs))
    ir_utils.set_boundary_attrs(main, "arg_attrs", [a for i, a in enumerate(args) if i not in token_args])
    ir_utils.set_boundary_attrs(main, "res_attrs", [r for i, r in enumerate(results) if i not in token_results])


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
            if attrs_key == "arg_attrs":  # laid out otherwise, each device holds a buffer of another size
                boundaries.donate_mismatched_aliases(dicts[:len(in_dims)], lambda arg, res: 0 <= res < len(out_dims)
                                                     and list(in_dims[arg]) != list(out_dims[res]))
            ir_utils.set_boundary_attrs(main, attrs_key, dicts)
