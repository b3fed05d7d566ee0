"""Where a pmap's global arguments and results live on its devices."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ..ir.pxla_attrs import REP_AXIS
from ..stages import Layout


class DeviceLayout:
    """The pmap axis over the devices' first mesh dimension, replicated over
    the rest (the devices nested pmaps use).

    A flat pmap's mesh is jax.pmap's, ``Mesh(devices, (axis,))``, and a value
    mapped on axis ``a`` is ``P(None, ..., axis)`` (``a`` Nones), as jax.pmap
    lays it out; a pmap with nested pmaps adds the inner devices as a second
    mesh axis, ``_pxla_rep``, over which every value is replicated.
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

    def layout(self, in_axes: Sequence, in_avals: Sequence, out_axes: Sequence, out_avals: Sequence, *,
               donated: Sequence[bool] = (), consts: Sequence = ()) -> Layout:
        """The Layout of flat inputs and outputs mapped on ``in_axes``/``out_axes`` (None: broadcast)."""
        return Layout(self.devices, in_avals, out_avals,
                      [self.sharding(a, av.ndim) for a, av in zip(in_axes, in_avals)],
                      [self.sharding(a, av.ndim) for a, av in zip(out_axes, out_avals)], donated, consts)
