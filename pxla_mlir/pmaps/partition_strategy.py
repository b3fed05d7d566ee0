"""The partitioning of a pmap's program: one frozen value, decided once.

A :class:`Partitioning` says over which partition axes XLA's partitioner
splits a program and, for a nest (a plain pmap holding partitioned pmaps,
:mod:`.nested_pmaps`), the pmap axes between: the nest is one program,
partitioned as a whole. A pmap's own one is made from its ``partitions=``
when the pmap is made (:func:`.partitions.make`) and travels in its
:class:`~.primitive.PmapParams` (and so in its equations); a lowering
decides the program's once (:func:`.nested_pmaps.program_partitioning`)
and hands it down. A plain pmap's is :data:`UNPARTITIONED`, whose answers
are those of a body that is not split.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import jax
from jax.sharding import AbstractMesh, AxisType

from pxla_mlir.jaxbridge.jax_internals import core
from pxla_mlir.mlir.core import pxla_attrs
from pxla_mlir.pmaps import partition_import
from pxla_mlir.pmaps.arguments import PmapUsageError
from pxla_mlir.pmaps.layout import Boundary, DeviceLayout
from pxla_mlir.pmaps.partition_layout import PartitionedLayout
from pxla_mlir.pmaps.partition_mesh import (
    PartitionAxes,
    describe,
    device_kind,
    enclosing,
    enclosing_axes,
    partitioned_devices,
    refuse_nested_partitions,
)
from pxla_mlir.stages.lowering import Layout

__all__ = ["Partitioning", "UNPARTITIONED", "PartitionAxes"]

#: (name, size) pmap axes, outermost first.
PmapAxes = tuple[tuple[Hashable, int], ...]


@dataclasses.dataclass(frozen=True)
class Partitioning:
    """The partition axes a program is split over and, for a nest holding a
    partitioned pmap, the pmap axes below the outermost. Hashable: it is a
    param of the ``pxla_pmap`` equation."""

    axes: PartitionAxes = ()  # (name, size), major first; (): not partitioned
    levels: PmapAxes = ()  # a partitioned nest: (name, size) of its pmaps below the outermost, outermost first

    def __post_init__(self) -> None:
        # tuples, whatever sequences were given: the value is hashed with the equation's params
        object.__setattr__(self, "axes", tuple((n, s) for n, s in self.axes))
        object.__setattr__(self, "levels", tuple((n, s) for n, s in self.levels))

    def __bool__(self) -> bool:
        return bool(self.axes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.axes)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(s for _, s in self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.sizes)

    @property
    def nest(self) -> bool:
        """Whether the partitioned pmap is nested in this one (the program is manual over every pmap axis)."""
        return bool(self.levels)

    def describe(self) -> str:
        """The axes as the ``partitions=`` dict."""
        return describe(self.axes)

    # -- tracing ---------------------------------------------------------------------------------
    def tracing(self, axis_name: Hashable, axis_size: int, backend: str | None = None,
                name: str | None = None) -> contextlib.AbstractContextManager[None]:
        """What a pmap's body is traced (and transformed) under: a partitioned body
        the mesh jax's shard_map sets (:meth:`_partitioned_mesh`); in a plain
        one, a partitioned pmap traced in it nests in its axis."""
        if not self:
            return enclosing(axis_name, axis_size)
        return self._partitioned_mesh(axis_name, axis_size, backend, name)

    @contextlib.contextmanager
    def _partitioned_mesh(self, axis_name: Hashable, axis_size: int, backend: str | None,
                          name: str | None) -> Iterator[None]:
        """The pmap axis manual, the partition axes automatic (so that
        ``with_sharding_constraint(v, PartitionSpec("model"))`` resolves), on
        ``backend``'s kind of device (so that the body also evaluates inside
        jax's shard_map over real devices, whose mesh names it). Inside other
        pmaps their axes come first, manual too: the nest is one program over
        that mesh (:mod:`.nested_pmaps`)."""
        context = jax.sharding.get_abstract_mesh()
        if not enclosing_axes() and not context.empty and context.manual_axes:  # jax.pmap's or shard_map's
            refuse_nested_partitions(name or axis_name, self.axes)
        kind = device_kind(backend)
        manual = (*enclosing_axes(), (axis_name, axis_size))
        names: tuple[Any, ...] = (*(n for n, _ in manual), *self.names)  # pmap axes are any hashable name
        mesh = AbstractMesh((*(s for _, s in manual), *self.sizes), names,
                            axis_types=(AxisType.Manual,) * len(manual) + (AxisType.Auto,) * len(self.axes),
                            abstract_device=kind)
        with jax.sharding.use_abstract_mesh(mesh):
            yield

    def global_results(self, avals: list[Any]) -> list[Any]:
        """A partitioned body's values carry its mesh; outside, the results are plain arrays."""
        if not self:
            return avals
        return [core.ShapedArray(av.shape, av.dtype, weak_type=av.weak_type) for av in avals]

    def refuse_nesting(self, name: str) -> None:
        """Where no mesh names the partition axes (inside jax.pmap, jax.shard_map, a vmapped pmap)."""
        if self:
            refuse_nested_partitions(name, self.axes)

    # -- devices and layout ----------------------------------------------------------------------
    def devices(self, axis_size: int, devices: Sequence[Any] | None, backend: str | None, what: str,
                nested: int = 1) -> Sequence[Any] | None:
        """``devices`` once checked to be enough for every index's group (see :func:`.partition_mesh.partitioned_devices`)."""
        if not self:
            return devices
        return partitioned_devices(axis_size, self.axes, devices, backend, what, nested)

    def layout(self, devices: Sequence[Any], axis_size: int, label: str, nested: tuple[tuple[str, int], ...],
               boundary: Boundary, placed: Any = None, module: Any = None) -> Layout:
        """The Layout of a pmap's boundary on ``devices`` (nested: (label, size) of the nest's levels;
        ``placed``: where import placed values by piece, :func:`.layout.placed_by_piece`)."""
        if not self:
            return DeviceLayout(devices, axis_size, label).layout(boundary, placed, module)
        return PartitionedLayout(devices, axis_size, label, self.axes, nested).layout(boundary)

    # -- import (.importer) ----------------------------------------------------------------------
    def refuse_nested_pmaps(self, name: str) -> None:
        """A partitioned body with nested pmaps (and no partitioned pmap among them, :mod:`.nested_pmaps`)."""
        if self:
            raise PmapUsageError(f"pmap {name!r} has partitions= and a nested pmap in its body: a partitioned body "
                                 f"cannot hold nested pmaps; nest the partitioned pmap in the others instead "
                                 f"(pmap(pmap(body, 'inner', partitions=...), 'outer', mode='partition'))")

    def check_body(self, jaxpr: Any, name: str) -> None:
        """Refuses what jax cannot lower in a partially manual program, before it tries."""
        if self:
            partition_import.check_callbacks(jaxpr, name)

    def manual_axes(self, pmap_axes: tuple[Any, ...]) -> tuple[Any, ...] | None:
        """The mesh axes the program is manual over (None: all of them)."""
        return pmap_axes if self else None

    def convert(self, lowered: Any, name: str) -> None:
        """jax's lowering of the body in pxla form: its sharding constraints become placeholders."""
        if not self:
            return
        if lowered.host_callbacks:
            partition_import.refuse_callbacks(name)
        partition_import.convert_constraints(lowered.module)

    def mark_manual(self, module: Any, labels: list[str]) -> None:
        """States on the module which of its mesh axes (``labels``) the program is manual over."""
        if self:
            with module.context:
                pxla_attrs.set_manual_axes(module.operation, labels)

    def check_module(self, module: Any, dialect: str, what: str) -> None:
        """Refuses an imported program the sharding ``dialect`` cannot state."""
        if self:
            partition_import.check_dialect(module, dialect, what)


#: The partitioning of every plain pmap (and of a nest holding no partitioned pmap).
UNPARTITIONED = Partitioning()
