"""ShardingSpec: which piece of an array lives on which device of a mesh.

``sharding`` says, per array dimension, how it is split:

* ``NoSharding()``: not split;
* ``Chunked([a, b])``: split into a*b equal chunks, ``a`` major;
* ``Unstacked(n)``: split into its ``n`` elements and the dimension removed
  (pmap's mapped axis: a device holds ``x[i]``, not ``x[i:i+1]``).

Each chunk count / unstacked size is a *sharded axis*, numbered in order.
``mesh_mapping`` lays them on the logical mesh, one entry per mesh dimension:
``ShardedAxis(i)`` (sharded axis i runs along this mesh dimension) or
``Replicated(n)`` (n copies). Devices are the mesh in row-major order, so
replication is the inner dimension when it comes last::

    >>> spec = ShardingSpec([Chunked([4])], [ShardedAxis(0), Replicated(2)])
    >>> [x for (x,) in spec_to_indices((4,), spec)]  # [1,2,3,4] over 8 devices
    [slice(0, 1), slice(0, 1), slice(1, 2), slice(1, 2), slice(2, 3), slice(2, 3), slice(3, 4), slice(3, 4)]
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import math
from collections.abc import Sequence

import numpy as np

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.sharding.devices import check_device_count

__all__ = ["NoSharding", "Chunked", "Unstacked", "ShardedAxis", "Replicated", "ShardingSpec",
           "ShardingSpecError", "spec_to_indices", "pmap_sharding_spec"]


class ShardingSpecError(PxlaUserError, ValueError):
    """A sharding spec that is malformed or does not fit an array."""


def _positive(what: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ShardingSpecError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class NoSharding:
    def __repr__(self) -> str:
        return "NoSharding()"


@dataclasses.dataclass(frozen=True)
class Chunked:
    chunks: tuple[int, ...]

    def __init__(self, chunks: int | np.integer | Sequence[int]):
        values = (chunks,) if isinstance(chunks, (int, np.integer)) else chunks
        object.__setattr__(self, "chunks", tuple(_positive("a chunk count", c) for c in values))

    def __repr__(self) -> str:
        return f"Chunked({list(self.chunks)})"


@dataclasses.dataclass(frozen=True)
class Unstacked:
    size: int

    def __post_init__(self):
        object.__setattr__(self, "size", _positive("an unstacked size", self.size))

    def __repr__(self) -> str:
        return f"Unstacked({self.size})"


@dataclasses.dataclass(frozen=True)
class ShardedAxis:
    axis: int

    def __repr__(self) -> str:
        return f"ShardedAxis({self.axis})"


@dataclasses.dataclass(frozen=True)
class Replicated:
    replicas: int

    def __post_init__(self):
        object.__setattr__(self, "replicas", _positive("a replica count", self.replicas))

    def __repr__(self) -> str:
        return f"Replicated({self.replicas})"


DimSharding = NoSharding | Chunked | Unstacked
MeshAssignment = ShardedAxis | Replicated
Index = tuple[int | slice, ...]


@dataclasses.dataclass(frozen=True)
class ShardingSpec:
    sharding: tuple[DimSharding, ...]
    mesh_mapping: tuple[MeshAssignment, ...]

    def __init__(self, sharding: Sequence[DimSharding], mesh_mapping: Sequence[MeshAssignment]):
        sharding, mesh_mapping = tuple(sharding), tuple(mesh_mapping)
        for s in sharding:
            if not isinstance(s, (NoSharding, Chunked, Unstacked)):
                raise ShardingSpecError(f"sharding entries must be NoSharding, Chunked or Unstacked, got {s!r}")
        for a in mesh_mapping:
            if not isinstance(a, (ShardedAxis, Replicated)):
                raise ShardingSpecError(f"mesh_mapping entries must be ShardedAxis or Replicated, got {a!r}")
        object.__setattr__(self, "sharding", sharding)
        object.__setattr__(self, "mesh_mapping", mesh_mapping)
        self._check_mapping()
        try:
            check_device_count(self.num_devices, repr(self))
        except ValueError as e:
            raise ShardingSpecError(str(e)) from None

    def _sharded_axis_sizes(self) -> list[int]:
        sizes: list[int] = []
        for s in self.sharding:
            if isinstance(s, Unstacked):
                sizes.append(s.size)
            elif isinstance(s, Chunked):
                sizes.extend(s.chunks)
        return sizes

    def _check_mapping(self) -> None:
        n = len(self._sharded_axis_sizes())
        used = [a.axis for a in self.mesh_mapping if isinstance(a, ShardedAxis)]
        twice = sorted({a for a in used if used.count(a) > 1})
        if twice:
            raise ShardingSpecError(f"{self!r}: mesh_mapping uses sharded axis {twice[0]} more than once")
        out_of_range = sorted(a for a in used if not 0 <= a < n)
        if out_of_range:
            raise ShardingSpecError(f"{self!r}: mesh_mapping names sharded axis {out_of_range[0]}, but the "
                                    f"sharding has {n} sharded axes (0..{n - 1})")
        never = sorted(set(range(n)) - set(used))
        if never:
            raise ShardingSpecError(f"{self!r}: sharded axis {never[0]} is never placed on the mesh; add "
                                    f"ShardedAxis({never[0]}) to mesh_mapping")

    # -- shape -----------------------------------------------------------------
    @property
    def mesh_shape(self) -> tuple[int, ...]:
        sizes = self._sharded_axis_sizes()
        return tuple(sizes[a.axis] if isinstance(a, ShardedAxis) else a.replicas for a in self.mesh_mapping)

    @property
    def num_devices(self) -> int:
        return math.prod(self.mesh_shape)

    def shard_shape(self, shape: Sequence[int]) -> tuple[int, ...]:
        """The per-device shape of an array of ``shape``."""
        self._check_shape(shape)
        out = []
        for size, s in zip(shape, self.sharding):
            if isinstance(s, Chunked):
                out.append(size // int(np.prod(s.chunks)))
            elif isinstance(s, NoSharding):
                out.append(size)
        return tuple(out)

    def _check_shape(self, shape: Sequence[int]) -> None:
        shape = tuple(shape)
        if len(shape) != len(self.sharding):
            raise ShardingSpecError(f"{self!r} describes {len(self.sharding)} dimensions, but the array "
                                    f"has shape {shape}")
        for dim, (size, s) in enumerate(zip(shape, self.sharding)):
            if isinstance(s, Unstacked) and size != s.size:
                raise ShardingSpecError(f"dimension {dim} of shape {shape} has size {size}, but "
                                        f"{s!r} needs size {s.size}")
            if isinstance(s, Chunked) and size % int(np.prod(s.chunks)):
                raise ShardingSpecError(f"dimension {dim} of shape {shape} (size {size}) does not split evenly "
                                        f"into {int(np.prod(s.chunks))} chunks ({s!r})")

    # -- indices ---------------------------------------------------------------
    def indices(self, shape: Sequence[int]) -> np.ndarray:
        """A numpy object array over the logical mesh: each entry is the index
        (a tuple of ints/slices) of the array piece that device holds."""
        self._check_shape(shape)
        per_dim: list[list] = []
        sharded_shape: list[int] = []
        for size, s in zip(shape, self.sharding):
            if isinstance(s, NoSharding):
                per_dim.append([slice(None)])
            elif isinstance(s, Unstacked):
                per_dim.append(list(range(size)))
                sharded_shape.append(size)
            else:
                total = int(np.prod(s.chunks))
                step = size // total
                per_dim.append([slice(i * step, (i + 1) * step) for i in range(total)])
                sharded_shape.extend(s.chunks)
        pieces = np.empty(int(np.prod(sharded_shape, dtype=np.int64)), dtype=object)
        for i, idx in enumerate(itertools.product(*per_dim)):
            pieces[i] = idx
        pieces = pieces.reshape(sharded_shape)
        replicas = tuple(a.replicas for a in self.mesh_mapping if isinstance(a, Replicated))
        sharded_order = iter(a.axis for a in self.mesh_mapping if isinstance(a, ShardedAxis))
        replica_pos = iter(range(len(replicas)))
        perm = [next(replica_pos) if isinstance(a, Replicated) else len(replicas) + next(sharded_order)
                for a in self.mesh_mapping]
        return np.broadcast_to(pieces, replicas + pieces.shape).transpose(perm)

    # -- text --------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"ShardingSpec({_seq(self.sharding)}, {_seq(self.mesh_mapping)})"

    @classmethod
    def parse(cls, text: str) -> ShardingSpec:
        """The inverse of ``repr``: ``ShardingSpec((Chunked([4]),), (ShardedAxis(0), Replicated(2)))``."""
        try:
            node = ast.parse(text.strip(), mode="eval").body
            value = _build(node)
        except (SyntaxError, ShardingSpecError, ValueError, TypeError) as e:
            raise ShardingSpecError(f"cannot parse sharding spec {text!r}: {e}") from None
        if not isinstance(value, ShardingSpec):
            raise ShardingSpecError(f"cannot parse sharding spec {text!r}: not a ShardingSpec(...)")
        return value


def _seq(items) -> str:
    return "(" + ", ".join(map(repr, items)) + ("," if len(items) == 1 else "") + ")"


_CONSTRUCTORS = {c.__name__: c for c in (ShardingSpec, NoSharding, Chunked, Unstacked, ShardedAxis, Replicated)}


def _build(node):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CONSTRUCTORS:
        if node.keywords:
            raise ValueError("keyword arguments are not supported")
        return _CONSTRUCTORS[node.func.id](*[_build(a) for a in node.args])
    if isinstance(node, (ast.Tuple, ast.List)):
        return [_build(e) for e in node.elts]
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    raise ValueError(f"unexpected {ast.unparse(node)!r}")


def spec_to_indices(shape: Sequence[int], spec: ShardingSpec) -> tuple[Index, ...]:
    """The index each device holds, in device (row-major mesh) order."""
    return tuple(spec.indices(shape).flat)


def pmap_sharding_spec(nrep: int, axis_size: int, ndim: int, map_axis: int | None) -> ShardingSpec:
    """The spec of a pmap argument/result: the per-device value has ``ndim``
    dimensions; ``map_axis`` (None: broadcast) is the mapped dimension of the
    global value. ``nrep`` is the number of devices (inner pmaps replicate)."""
    replication, ragged = divmod(nrep, axis_size)
    if ragged:
        raise ShardingSpecError(f"{nrep} devices cannot hold a pmap axis of size {axis_size} evenly")
    inner = (Replicated(replication),) if replication > 1 else ()
    if map_axis is None:
        return ShardingSpec([NoSharding()] * ndim, (Replicated(axis_size),) + inner)
    if not 0 <= map_axis <= ndim:
        raise ShardingSpecError(f"mapped axis {map_axis} is out of range for a {ndim + 1}-d value")
    sharding: list[DimSharding] = [NoSharding()] * ndim
    sharding.insert(map_axis, Unstacked(axis_size))
    return ShardingSpec(sharding, (ShardedAxis(0),) + inner)
