"""Where a pmap's global arguments and results live on its devices."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxlib.mlir import ir

from pxla_mlir.mlir.core import ir_utils, pxla_attrs
from pxla_mlir.mlir.core.pxla_attrs import MESH, REP_AXIS, TILE_DIMS
from pxla_mlir.runtime.results import physical
from pxla_mlir.stages.lowering import Layout

if TYPE_CHECKING:
    from jax.core import ShapedArray

__all__ = ["Boundary", "DeviceLayout", "Placed", "placed_by_piece"]


@dataclasses.dataclass(frozen=True)
class Boundary:
    """A pmap's flat inputs and outputs: mapped axes (None: broadcast) and
    global avals, donation, the hoisted constants (the first inputs) and, for
    a partitioned body, a PartitionSpec or None (replicated over a group) per
    input and output."""

    in_axes: tuple[int | None, ...]
    in_avals: tuple[ShapedArray, ...]
    out_axes: tuple[int | None, ...]
    out_avals: tuple[ShapedArray, ...]
    donated: tuple[bool, ...] = ()
    consts: tuple = ()
    in_specs: tuple[PartitionSpec | None, ...] = ()
    out_specs: tuple[PartitionSpec | None, ...] = ()


class DeviceLayout:
    """The pmap axis over the devices' first mesh dimension, replicated over
    the rest (the devices nested pmaps use).

    A flat pmap's mesh is jax.pmap's, ``Mesh(devices, (axis,))``, and a value
    mapped on axis ``a`` is ``P(None, ..., axis)`` (``a`` Nones), as jax.pmap
    lays it out; a pmap with nested pmaps adds the inner devices as a second
    mesh axis, ``_pxla_rep``, over which every value is replicated, unless
    import placed some values by piece over them (:func:`placed_by_piece`).
    """

    def __init__(self, devices: Sequence, axis_size: int, label: str):
        self.devices = list(devices)
        self.axis_size = axis_size
        self.replication = len(self.devices) // axis_size
        self.label = label
        grid = np.array(self.devices, dtype=object)
        self.mesh = Mesh(grid, (label,)) if self.replication == 1 else \
            Mesh(grid.reshape(axis_size, self.replication), (label, REP_AXIS))
        self._replicated = NamedSharding(self.mesh, PartitionSpec())

    def sharding(self, axis: int | None, ndim: int) -> NamedSharding:
        if axis is None:
            return self._replicated
        return NamedSharding(self.mesh, PartitionSpec(*[None] * axis, self.label))

    def layout(self, b: Boundary, placed: Placed | None = None, module: ir.Module | None = None) -> Layout:
        """The Layout of the flat inputs and outputs; with ``placed`` (:func:`placed_by_piece`
        of the imported module), as import placed values by piece. With the module, its
        @main's tiles are checked against that layout."""
        if placed is not None and self.replication > 1:
            layout = Layout(self.devices, b.in_avals, b.out_avals, *_shardings(placed, self.devices), b.donated,
                            b.consts)
            if module is not None:
                _check_tiles(layout, module)
            return layout
        return Layout(self.devices, b.in_avals, b.out_avals,
                      [self.sharding(a, av.ndim) for a, av in zip(b.in_axes, b.in_avals)],
                      [self.sharding(a, av.ndim) for a, av in zip(b.out_axes, b.out_avals)], b.donated, b.consts)


#: Where import placed values by piece, as plain data (kept in the lowering cache): the mesh's
#: ``[[axis, size], ...]`` and, per argument and result, the mesh axes splitting each dimension.
Placed = dict


def placed_by_piece(module: ir.Module) -> Placed | None:
    """Where @main's ``pxla.tile_dims`` place values over the module's
    ``pxla.mesh``, when that mesh splits the inner devices (values placed by
    piece); None for the plain (pmap axis, replicas) mesh."""
    op = module.operation
    mesh_text = pxla_attrs.read_str(op, MESH)
    assert mesh_text is not None  # import sets it
    mesh = pxla_attrs.parse_mesh(mesh_text, op)
    if REP_AXIS in mesh.axis_names or len(mesh.axis_names) < 2:
        return None
    main = _main(op)
    return {"mesh": [[str(a), int(n)] for a, n in zip(mesh.axis_names, mesh.axis_sizes)],
            "in": [_tile_axes(d) for d in pxla_attrs.boundary_attrs(main, "arg_attrs")],
            "out": [_tile_axes(d) for d in pxla_attrs.boundary_attrs(main, "res_attrs")]}


def _tile_axes(entries: dict) -> list[list[str]]:
    return [[ir.StringAttr(a).value for a in ir.ArrayAttr(d)] for d in ir.ArrayAttr(entries[TILE_DIMS])]


def _shardings(placed: Placed, devices: Sequence) -> tuple[list, list]:
    names, sizes = zip(*placed["mesh"])
    grid = Mesh(np.array(list(devices), dtype=object).reshape(sizes), tuple(names))
    return [_sharding(grid, d) for d in placed["in"]], [_sharding(grid, d) for d in placed["out"]]


def _sharding(mesh: Mesh, dims: list[list[str]]) -> NamedSharding:
    spec = [None if not axes else axes[0] if len(axes) == 1 else tuple(axes) for axes in dims]
    while spec and spec[-1] is None:
        spec.pop()
    return NamedSharding(mesh, PartitionSpec(*spec))


def _check_tiles(layout: Layout, module: ir.Module) -> None:
    """Every buffer the layout places must be the tile @main takes or gives:
    jaxlib crashes the process on a buffer of another size."""
    main = _main(module.operation)
    ftype = pxla_attrs.function_type(main)
    for what, avals, shardings, types in (("argument", layout.in_avals, layout.in_shardings, ftype.inputs),
                                          ("result", layout.out_avals, layout.out_shardings, ftype.results)):
        for i, (aval, sharding, t) in enumerate(zip(avals, shardings, types)):
            assert sharding is not None  # a pmap places every value
            aval_, sharding_ = physical(aval, sharding)  # a PRNG key's buffer has its key data dimensions
            tile = tuple(sharding_.shard_shape(aval_.shape))
            if tile != tuple(ir.RankedTensorType(t).shape):
                raise RuntimeError(f"internal error: {what} {i} of {aval.str_short()} is placed as {tile} pieces by "
                                   f"{sharding}, but the module's @main has {t}; please report it")


def _main(module: ir.Operation) -> ir.Operation:
    main = ir_utils.find_function(module, "main")
    assert main is not None  # import makes it
    return main
