"""Where a partitioned pmap's (:mod:`.partitions`) values live: on its devices, and in @main's ``pxla.tile_dims``."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from pxla_mlir.pmaps.layout import Boundary
from pxla_mlir.pmaps.partition_mesh import PartitionAxes
from pxla_mlir.pmaps.partition_specs import spec_axes
from pxla_mlir.stages.lowering import Layout

__all__ = ["PartitionedLayout", "tile_dims"]


class PartitionedLayout:
    """Where a partitioned pmap's global arguments and results live: the
    devices as a (pmap axis, partition axes...) mesh, index-major (2022's
    replica-major device assignment). A pmap of axis size 1 with every value
    unmapped (a bare sharded_jit call) is one group: its mesh is the partition
    axes alone and each value's spec is its own, as jax.jit with NamedShardings
    over those devices lays them out."""

    def __init__(self, devices: Sequence[Any], axis_size: int, label: str, axes: PartitionAxes,
                 nested: tuple[tuple[Hashable, int], ...] = ()):
        # nested: (label, size) of the pmap axes between (a partitioned pmap nested in this one, .nested_pmaps)
        self.devices = list(devices)
        self.names, self.sizes = tuple(n for n, _ in axes), tuple(s for _, s in axes)
        levels, labels = (s for _, s in nested), (n for n, _ in nested)
        self.mesh = jax.sharding.Mesh(np.array(self.devices, dtype=object).reshape(axis_size, *levels, *self.sizes),
                                      (label, *labels, *self.names))
        self.axis_size, self.label, self.nested = axis_size, label, nested

    def sharding(self, axis: int | None, ndim: int, spec: PartitionSpec | None) -> NamedSharding:
        entries = list(spec or ()) + [None] * (ndim - (axis is not None) - len(spec or ()))
        if axis is not None:
            entries.insert(axis, self.label)
        return NamedSharding(self.mesh, PartitionSpec(*entries))

    def layout(self, b: Boundary) -> Layout:
        in_specs, out_specs = b.in_specs or (None,) * len(b.in_axes), b.out_specs or (None,) * len(b.out_axes)
        if self.axis_size == 1 and not self.nested and all(a is None for a in (*b.in_axes, *b.out_axes)):
            group = jax.sharding.Mesh(np.array(self.devices, dtype=object).reshape(self.sizes), self.names)
            return Layout(tuple(self.devices), b.in_avals, b.out_avals,
                          tuple(NamedSharding(group, s if s is not None else PartitionSpec()) for s in in_specs),
                          tuple(NamedSharding(group, s if s is not None else PartitionSpec()) for s in out_specs),
                          b.donated, b.consts)
        return Layout(tuple(self.devices), b.in_avals, b.out_avals,
                      tuple(self.sharding(a, av.ndim, s) for a, av, s in zip(b.in_axes, b.in_avals, in_specs)),
                      tuple(self.sharding(a, av.ndim, s) for a, av, s in zip(b.out_axes, b.out_avals, out_specs)),
                      b.donated, b.consts)


def tile_dims(spec: PartitionSpec | None, axis: int | None, rank: int, label: str) -> list[list[str]]:
    """``pxla.tile_dims`` of a per-device @main value (rank counts the pmap's unit dimension)."""
    entries = [list(spec_axes(e)) for e in (spec or ())]
    entries += [[] for _ in range(rank - (axis is not None) - len(entries))]
    if axis is not None:
        entries.insert(axis, [label])
    return entries
