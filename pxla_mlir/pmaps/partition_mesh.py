"""The partition axes of a partitioned pmap (:mod:`.partitions`) on meshes and devices.

A partitioned body is traced under an abstract mesh whose pmap axes (its own
and those of the pmaps it is traced inside, :func:`enclosing_axes`) are
manual and whose partition axes are automatic, on the kind of device it will
run on (:func:`device_kind`). It runs on ``axis size × nested × group``
devices (:func:`partitioned_devices`), and cannot run where no mesh names its
partition axes (:func:`refuse_nested_partitions`).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import jax
import numpy as np

from pxla_mlir.mlir.sharding.devices import too_few_devices
from pxla_mlir.pmaps.arguments import PmapUsageError

__all__ = ["PartitionAxes", "describe", "device_kind", "enclosing_axes", "enclosing", "partitioned_devices",
           "refuse_nested_partitions"]

#: (name, size) of each partition axis, major first, as a pxla_pmap equation holds them; () for a plain pmap.
PartitionAxes = tuple[tuple[str, int], ...]


def describe(partitions: PartitionAxes) -> str:
    """(name, size) partition axes as the ``partitions=`` dict."""
    return "{" + ", ".join(f"{k!r}: {v}" for k, v in partitions) + "}"


def device_kind(backend: str | None = None) -> Any:
    """The abstract device of ``backend``'s devices, as jax's meshes over them name it."""
    device = jax.local_devices(backend=backend)[0]
    return jax.sharding.Mesh(np.array([device]), ("_",)).abstract_mesh.abstract_device


class _Enclosing(threading.local):
    # (name, size) of the pmaps whose bodies are being traced or transformed, outermost first
    axes: tuple[tuple[Hashable, int], ...] = ()


_enclosing = _Enclosing()


def enclosing_axes() -> tuple[tuple[Hashable, int], ...]:
    """The pmap axes around a pmap being traced now: part of a partitioned body's mesh."""
    return _enclosing.axes


@contextlib.contextmanager
def enclosing(axis_name: Hashable, axis_size: int) -> Iterator[None]:
    """While a pmap's body is traced or transformed: a partitioned pmap in it nests in its axis."""
    saved = _enclosing.axes
    _enclosing.axes = (*saved, (axis_name, axis_size))
    try:
        yield
    finally:
        _enclosing.axes = saved


def partitioned_devices(axis_size: int, partitions: PartitionAxes, devices: Sequence[Any] | None,
                        backend: str | None, what: str, nested: int = 1) -> Sequence[Any] | None:
    """Checks that there are ``axis_size × group`` devices for a partitioned
    pmap (``devices=`` or the available ones), naming both numbers; returns
    ``devices`` (None: the defaults). ``nested``: devices per index of the
    pmaps nested in this one, a partitioned pmap innermost (:mod:`.nested_pmaps`)."""
    group = math.prod(s for _, s in partitions)
    n = axis_size * nested * group
    parts = describe(partitions)
    need = (f"{what} maps an axis of size {axis_size} and partitions each index over {parts}: it needs "
            f"{axis_size} × {group} = {n} devices") if nested == 1 else (
            f"{what} maps an axis of size {axis_size}, its nested pmaps {nested} devices per index, and a "
            f"partitioned pmap in them {parts}: it needs {axis_size} × {nested} × {group} = {n} devices")
    if devices is not None:
        if len(devices) != n:
            raise PmapUsageError(f"{need}, but devices= lists {len(devices)}; pass exactly {n}, index-major (the "
                                 f"{n // axis_size} devices of index 0 first)")
        return devices
    if jax.process_count(backend) > 1:
        return None  # every process's devices: checked where they are chosen
    available = jax.local_devices(backend=backend)
    if n > len(available):
        platform = available[0].platform
        raise PmapUsageError(f"{need}, but only {len(available)} {platform.upper()} devices are available"
                             + too_few_devices(n, available, backend))
    return None


def refuse_nested_partitions(name: Hashable, partitions: PartitionAxes) -> None:
    """A partitioned pmap where no mesh names its partition axes: inside jax.pmap, jax.shard_map or a pmap
    that runs as jax.vmap under jax.jit."""
    spec = ", ".join(repr(k) for k, _ in partitions)
    raise PmapUsageError(
        f"pmap {name!r} with partitions={describe(partitions)} inside jax.pmap, jax.shard_map or a pmap that runs as "
        f"jax.vmap under jax.jit: its program there is manual over every axis, so it has no automatic axes for "
        f"XLA's partitioner to split. A partitioned pmap nests in pxla_mlir.pmap's with mode=\"partition\" (one "
        f"pmap axis per level: the nest is one program manual over its pmap axes, automatic over {spec}), and runs "
        f"inside jax.jit and pxla_mlir.jit; or use jax.jit(jax.shard_map(f, mesh=Mesh(devices.reshape(outer, inner, "
        f"...), ('outer', 'inner', {spec})), axis_names={{'outer', 'inner'}})). A sharded_jit function is such a "
        f"pmap: for 2022's pmap(sharded_jit(f, ...)) use pxla_mlir.pmap (not jax.pmap), which maps f itself with "
        f"its partitions")
