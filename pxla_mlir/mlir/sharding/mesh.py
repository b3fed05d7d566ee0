"""Meshes: devices in an n-d array with named axes, and how arrays map onto them.

A *mapping* ``{mesh axis: array dimension}`` says which dimension each mesh
axis splits. Several mesh axes may split one dimension; their order in the
mapping is major to minor. On a mesh ``{'x': 2, 'y': 3}``, ``{'x': 1, 'y': 1}``
cuts dimension 1 into 6 chunks with 'y' fastest, so chunk k goes to the k-th
device in row-major mesh order; ``{'y': 1, 'x': 1}`` makes 'x' fastest (the
mesh is transposed before the chunks are dealt out).

:class:`AbstractMesh` has only names and sizes (enough to lower without
hardware); :class:`Mesh` adds devices and is a context manager: ``with
Mesh(...)`` makes it the current mesh of this thread (nesting allowed).
"""

from __future__ import annotations

import collections
import math
import threading
from collections.abc import Mapping, Sequence

import numpy as np

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.sharding.devices import backend_error, check_device_count, repeated_device, too_few_devices
from pxla_mlir.mlir.sharding.spec import Chunked, NoSharding, Replicated, ShardedAxis, ShardingSpec

__all__ = ["AbstractMesh", "Mesh", "MeshError", "current_mesh", "mapping_from_dims", "dims_from_mapping", "axis_groups"]

ArrayMapping = Mapping[str, int]


class MeshError(PxlaUserError, ValueError):
    """A mesh, or a mapping onto a mesh, that cannot work; the message names the culprit."""


class AbstractMesh:
    """Axis names and sizes, no devices."""

    __slots__ = ("_names", "_sizes", "_hash")

    def __init__(self, axis_sizes: Sequence[int], axis_names: Sequence[str]):
        names, sizes = tuple(axis_names), tuple(int(s) for s in axis_sizes)
        if len(names) != len(sizes):
            raise MeshError(f"{len(names)} axis names {names} for {len(sizes)} mesh dimensions {sizes}")
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise MeshError(f"mesh axis name {dup!r} is used twice in {names}")
        for n in names:
            if not isinstance(n, str) or not n:
                raise MeshError(f"mesh axis names must be non-empty strings, got {n!r}")
        for n, s in zip(names, sizes):
            if s < 1:
                raise MeshError(f"mesh axis {n!r} has size {s}; sizes must be positive")
        try:
            check_device_count(math.prod(sizes), f"mesh {dict(zip(names, sizes))}")
        except ValueError as e:
            raise MeshError(str(e)) from None
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_sizes", sizes)

    def __setattr__(self, name, value):
        raise AttributeError("meshes are immutable")

    # -- shape -----------------------------------------------------------------
    @property
    def axis_names(self) -> tuple[str, ...]:
        return self._names

    @property
    def axis_sizes(self) -> tuple[int, ...]:
        return self._sizes

    @property
    def shape(self) -> collections.OrderedDict[str, int]:
        return collections.OrderedDict(zip(self._names, self._sizes))

    @property
    def size(self) -> int:
        return math.prod(self._sizes)

    @property
    def empty(self) -> bool:
        return not self._names

    def abstract(self) -> AbstractMesh:
        return AbstractMesh(self._sizes, self._names)

    def __eq__(self, other):
        return type(other) is AbstractMesh and (self._names, self._sizes) == (other._names, other._sizes)

    def __hash__(self):
        return hash((self._names, self._sizes))

    def __repr__(self) -> str:
        return f"AbstractMesh({dict(self.shape)})"

    # -- arrays on the mesh ------------------------------------------------------
    def check_mapping(self, mapping: ArrayMapping, ndim: int, what: str = "value") -> None:
        for axis, dim in mapping.items():
            if axis not in self._names:
                raise MeshError(f"mesh axis {axis!r} (mapped to dimension {dim} of the {what}) is not in the "
                                f"mesh; its axes are {', '.join(map(repr, self._names)) or 'none'}")
            if not isinstance(dim, (int, np.integer)) or not 0 <= dim < ndim:
                raise MeshError(f"mesh axis {axis!r} is mapped to dimension {dim}, but the {what} has "
                                f"{ndim} dimensions")

    def tile_shape(self, shape: Sequence[int], mapping: ArrayMapping, what: str = "value") -> tuple[int, ...]:
        """The per-device shape: each mapped dimension divided by its mesh axes."""
        shape = list(shape)
        self.check_mapping(mapping, len(shape), what)
        for dim, axes in _axes_per_dim(mapping).items():
            parts = int(np.prod([self.shape[a] for a in axes]))
            if shape[dim] % parts:
                raise MeshError(f"dimension {dim} of the {what} (shape {tuple(shape)}) has size {shape[dim]}, "
                                f"which mesh axes {', '.join(map(repr, axes))} (size {parts}) do not divide")
            shape[dim] //= parts
        return tuple(shape)

    def untile_shape(self, shape: Sequence[int], mapping: ArrayMapping, what: str = "value") -> tuple[int, ...]:
        shape = list(shape)
        self.check_mapping(mapping, len(shape), what)
        for axis, dim in mapping.items():
            shape[dim] *= self.shape[axis]
        return tuple(shape)

    def sharding_spec(self, ndim: int, mapping: ArrayMapping) -> ShardingSpec:
        """The spec of a *global* value of rank ``ndim`` split by ``mapping``;
        unmapped mesh axes replicate it."""
        self.check_mapping(mapping, ndim)
        sharding: list = [NoSharding()] * ndim
        mesh_mapping: list = [Replicated(s) for s in self._sizes]
        # sorted() is stable: mesh axes on the same dimension keep mapping order.
        for next_axis, (axis, dim) in enumerate(sorted(mapping.items(), key=lambda kv: kv[1])):
            chunks = sharding[dim].chunks if isinstance(sharding[dim], Chunked) else ()
            sharding[dim] = Chunked(chunks + (self.shape[axis],))
            mesh_mapping[self._names.index(axis)] = ShardedAxis(next_axis)
        return ShardingSpec(sharding, mesh_mapping)


def _axes_per_dim(mapping: ArrayMapping) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for axis, dim in mapping.items():
        out.setdefault(dim, []).append(axis)
    return out


def axis_groups(num_devices: int, stride: int, size: int) -> np.ndarray:
    """Device groups of one mesh axis: devices that differ only in their index
    ``(d // stride) % size``, each group ordered by that index."""
    return np.arange(num_devices).reshape(num_devices // (size * stride), size, stride) \
        .transpose(0, 2, 1).reshape(-1, size)


def mapping_from_dims(dims: Sequence[Sequence[str] | None]) -> dict[str, int]:
    """``[['x'], [], ['y', 'z']]`` (mesh axes per dimension, major first) ->
    ``{'x': 0, 'y': 2, 'z': 2}``."""
    mapping: dict[str, int] = {}
    for dim, axes in enumerate(dims):
        for axis in axes or ():
            if axis in mapping:
                raise MeshError(f"mesh axis {axis!r} splits dimensions {mapping[axis]} and {dim}; a mesh axis "
                                f"can split only one dimension of a value")
            mapping[axis] = dim
    return mapping


def dims_from_mapping(mapping: ArrayMapping, ndim: int) -> list[list[str]]:
    dims: list[list[str]] = [[] for _ in range(ndim)]
    for axis, dim in mapping.items():
        dims[dim].append(axis)
    return dims


class Mesh(AbstractMesh):
    """An n-d array of devices with axis names; immutable and hashable.

    ``Mesh(np.empty((), dtype=object), ())`` is 2022's empty mesh (jax's
    ``EMPTY_ENV``): no devices, no axes; entering it means "no mesh"
    (``empty``). A zero-dimensional array holding a device is a mesh of
    that one device."""

    __slots__ = ("_devices", "_hash", "no_devices")

    def __init__(self, devices, axis_names: Sequence[str]):
        arr = np.array(devices, dtype=object)
        if arr.ndim != len(tuple(axis_names)):
            raise MeshError(f"a {arr.ndim}-d device array needs {arr.ndim} axis names, got {tuple(axis_names)}")
        super().__init__(arr.shape, axis_names)
        if arr.ndim == 0 and arr.item() is None:  # the empty mesh
            self._freeze(arr, ())
            return
        missing = [i for i, d in enumerate(arr.flat) if not hasattr(d, "id")]
        if missing:
            raise MeshError(f"mesh entry {missing[0]} is {arr.flat[missing[0]]!r}, not a device; build a mesh from "
                            f"jax.devices() (or np.empty((), dtype=object) with axis names () for no mesh)")
        ids = [d.id for d in arr.flat]
        twice = repeated_device(arr.flat)
        if twice is not None:
            first, second = twice
            raise MeshError(f"device {ids[first]} appears more than once in the mesh (entries {first} and {second} of "
                            f"its device array, row-major); each mesh position runs its own shard, so build the mesh "
                            f"from distinct devices (e.g. np.array(jax.devices()[:{len(ids)}]).reshape("
                            f"{', '.join(map(str, arr.shape))}), or pxla_mlir.Mesh.create)")
        self._freeze(arr, tuple(ids))

    def _freeze(self, arr: np.ndarray, ids: tuple) -> None:
        # Hashed once, and plain attributes: an xmap looks its program up by the mesh in scope on every call.
        arr.flags.writeable = False
        object.__setattr__(self, "_devices", arr)
        object.__setattr__(self, "_hash", hash((self._names, arr.shape, ids)))
        #: :attr:`empty`, as a plain attribute (every mesh but the empty one has devices: sizes are >= 1).
        object.__setattr__(self, "no_devices", not ids)

    @classmethod
    def create(cls, shape: Mapping[str, int] | Sequence[int], axis_names: Sequence[str] | None = None,
               devices: Sequence | None = None) -> Mesh:
        """A mesh over the first devices (of ``devices`` or jax's default backend):
        ``Mesh.create({'x': 2, 'y': 4})``."""
        if isinstance(shape, Mapping):
            axis_names, sizes = tuple(shape), tuple(shape.values())
        else:
            sizes = tuple(shape)
        if axis_names is None:
            raise MeshError("give axis names, or the shape as a {name: size} mapping")
        given = devices is not None
        if devices is None:
            import jax

            try:
                devices = jax.devices()
            except (AssertionError, RuntimeError) as e:
                clear = backend_error(e, "Mesh.create")
                if clear is None:
                    raise
                raise clear from None
        n = int(np.prod(sizes, dtype=np.int64))
        if n > len(devices):
            raise MeshError(f"a mesh of shape {dict(zip(axis_names, sizes))} needs {n} devices, but only "
                            f"{len(devices)} exist{_hint(n, devices, given)}")
        return cls(np.array(list(devices[:n]), dtype=object).reshape(sizes), axis_names)

    @property
    def devices(self) -> np.ndarray:
        return self._devices

    @property
    def empty(self) -> bool:
        """2022's empty mesh (``np.empty((), dtype=object)``): no devices at all."""
        return self.no_devices

    @property
    def device_ids(self) -> np.ndarray:
        if self.empty:
            return np.empty((), dtype=int)
        return np.vectorize(lambda d: d.id, otypes=[int])(self._devices)

    def abstract(self) -> AbstractMesh:
        return AbstractMesh(self._sizes, self._names)

    def __eq__(self, other):
        return self is other or (isinstance(other, Mesh) and self._hash == other._hash and self._names == other._names
                and self._devices.shape == other._devices.shape
                and all(a is b or a == b for a, b in zip(self._devices.flat, other._devices.flat)))

    def __hash__(self):
        return self._hash

    def __repr__(self) -> str:
        if self.empty:
            return "Mesh(np.empty((), dtype=object), ())"
        return f"Mesh({self.device_ids.tolist()!r}, {self._names!r})"

    # -- processes ---------------------------------------------------------------
    @property
    def local_devices(self) -> list:
        pid = _process_index()
        return [d for d in self._devices.flat if d.process_index == pid]

    @property
    def is_multi_process(self) -> bool:
        return len(self.local_devices) != self._devices.size

    @property
    def local_mesh(self) -> Mesh:
        return self.local_mesh_of(_process_index())

    def local_mesh_of(self, process_index: int) -> Mesh:
        """The sub-mesh of one process's devices; they must form a contiguous sub-cube."""
        local = np.vectorize(lambda d: d.process_index == process_index, otypes=[bool])(self._devices)
        if not local.any():
            raise MeshError(f"process {process_index} has no device in {self!r}")
        hull = []
        for axis in range(local.ndim):
            hits = np.flatnonzero(local.any(axis=tuple(a for a in range(local.ndim) if a != axis)))
            hull.append(slice(int(hits.min()), int(hits.max()) + 1))
        if not local[tuple(hull)].all():
            raise MeshError(f"the devices of process {process_index} do not form a contiguous sub-cube of "
                            f"{self!r}; reorder the mesh devices so each process owns a block")
        return Mesh(self._devices[tuple(hull)], self._names)

    # -- resource environment -------------------------------------------------------
    def __enter__(self) -> Mesh:
        _stack().append(self)
        return self

    def __exit__(self, *exc) -> bool:
        _stack().pop()
        return False


def _hint(n: int, devices: Sequence, given: bool) -> str:
    """How to get ``n`` devices: from jax's default backend (which it names), or in every process."""
    if not devices:
        return ""
    processes = len({getattr(d, "process_index", 0) for d in devices})
    if processes == 1:
        return " in the devices given" if given else too_few_devices(n, devices)
    if getattr(devices[0], "platform", None) != "cpu":
        return ""
    per = -(-n // processes)
    return (f" in the {processes} processes (on CPU, start every process with {per} devices: "
            f"jax.config.update('jax_num_cpu_devices', {per}) before jax.distributed.initialize)")


class _ThreadMeshes(threading.local):
    def __init__(self):
        self.stack: list[Mesh] = []


_meshes = _ThreadMeshes()


def _stack() -> list[Mesh]:
    return _meshes.stack


def current_mesh() -> Mesh | None:
    """The innermost mesh entered with ``with mesh:`` on this thread, or None."""
    stack = _meshes.stack
    return stack[-1] if stack else None


def _process_index() -> int:
    import jax

    return jax.process_index()
