"""Where a pmap's global arguments and results live on its devices."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .primitive import REP_AXIS


class DeviceLayout:
    """The pmap axis over the devices' first mesh dimension, replicated over
    the rest (the devices nested pmaps use)."""

    def __init__(self, devices: Sequence, axis_size: int, label: str):
        self.devices = list(devices)
        self.axis_size = axis_size
        self.replication = len(self.devices) // axis_size
        self.label = label
        self.mesh = Mesh(np.array(self.devices, dtype=object).reshape(axis_size, self.replication),
                         (label, REP_AXIS))
        self._replicated = NamedSharding(self.mesh, PartitionSpec())

    def sharding(self, axis: int | None, ndim: int) -> NamedSharding:
        if axis is None:
            return self._replicated
        return NamedSharding(self.mesh, PartitionSpec(*[self.label if d == axis else None for d in range(ndim)]))
