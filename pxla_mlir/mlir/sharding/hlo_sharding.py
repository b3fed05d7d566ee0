"""HLO sharding strings (``mhlo.sharding``) exactly as XLA prints them.

An :class:`HloSharding` is replicated, manual, maximal (one device) or tiled.
A tiled sharding splits the data dimensions by ``tile_dims`` and may end in
*subgroup* dimensions whose devices hold the same tile: ``replicated``
(``last_tile_dim_replicate``) or ``manual`` (``last_tile_dims={manual}``).

``str()`` gives XLA's canonical text, the form ``xla::HloSharding`` prints
back unchanged: size-1 subgroups are dropped, manual comes before replicated,
a sharding that tiles nothing is ``{replicated}`` or ``{manual}``, and a
device order that is a transposed iota is written ``<=[dims]T(perm)`` with
XLA's dimension merging. :func:`parse` reads both iota and explicit forms.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from pxla_mlir.mlir.sharding.devices import check_device_count
from pxla_mlir.mlir.sharding.mesh import AbstractMesh, MeshError
from pxla_mlir.mlir.sharding.spec import NoSharding, Replicated, ShardedAxis, ShardingSpec, ShardingSpecError, Unstacked

__all__ = ["HloSharding", "parse", "parse_elements", "canonical_iota", "of_spec", "of_mapping", "manual_tile"]

SUBGROUP_KINDS = ("manual", "replicated")  # XLA's canonical order


def canonical_iota(reshape_dims: Sequence[int], perm: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """XLA's canonical (reshape_dims, perm) of ``iota(reshape_dims).transpose(perm)``:
    size-1 dims dropped, dims adjacent in both orders merged."""
    dims = list(reshape_dims)
    order = [p for p in perm if dims[p] != 1]
    keep = sorted(order)
    dims = [dims[p] for p in keep]
    order = [keep.index(p) for p in order]
    merged = True
    while merged:
        merged = False
        for k in range(len(order) - 1):
            a, b = order[k], order[k + 1]
            if b == a + 1:  # dims a and a+1 stay together: one dim
                dims[a] *= dims[b]
                del dims[b]
                order = [p - (p > b) for p in order if p != b]
                merged = True
                break
    if order == sorted(order):
        return (int(np.prod(dims, dtype=np.int64)),), (0,)
    return tuple(dims), tuple(order)


@dataclasses.dataclass(frozen=True)
class HloSharding:
    kind: str  # "replicated" | "manual" | "maximal" | "tiled"
    tile_dims: tuple[int, ...] = ()  # data dimensions only
    subgroups: tuple[tuple[str, int], ...] = ()  # trailing (kind, size) dims
    devices: tuple[int, ...] = ()  # logical device ids, row-major over tile_dims + subgroups
    device: int | None = None  # maximal
    iota: tuple[tuple[int, ...], tuple[int, ...]] | None = None  # canonical (dims, perm) if any

    # -- construction ----------------------------------------------------------
    @classmethod
    def replicated(cls) -> HloSharding:
        return cls("replicated")

    @classmethod
    def manual(cls) -> HloSharding:
        return cls("manual")

    @classmethod
    def maximal(cls, device: int) -> HloSharding:
        return cls("maximal", device=int(device))

    @classmethod
    def tiled(cls, tile_dims: Sequence[int], devices: np.ndarray | Sequence[int],
              subgroups: Sequence[tuple[str, int]] = ()) -> HloSharding:
        """From an explicit device array (any shape with the right size)."""
        dims = tuple(int(d) for d in tile_dims)
        subgroups = tuple((k, int(s)) for k, s in subgroups)
        arr = np.asarray(devices, dtype=np.int64).reshape(dims + tuple(s for _, s in subgroups))
        return cls._canonical(dims, subgroups, arr)

    @classmethod
    def from_mesh(cls, mesh_shape: Sequence[int], perm: Sequence[int], tile_dims: Sequence[int],
                  subgroups: Sequence[tuple[str, int]] = ()) -> HloSharding:
        """Devices ``iota(mesh_shape).transpose(perm)`` laid over the tile."""
        arr = np.arange(int(np.prod(mesh_shape, dtype=np.int64))).reshape(tuple(mesh_shape)).transpose(perm)
        return cls.tiled(tile_dims, arr, subgroups)

    @classmethod
    def _canonical(cls, dims, subgroups, arr: np.ndarray) -> HloSharding:
        for kind, _ in subgroups:
            if kind not in SUBGROUP_KINDS:
                raise ValueError(f"unknown subgroup kind {kind!r}; expected one of {SUBGROUP_KINDS}")
        # Drop size-1 subgroups, order manual before replicated (merging repeats).
        nd = len(dims)
        keep = [i for i, (_, s) in enumerate(subgroups) if s != 1]
        by_kind = {k: [i for i in keep if subgroups[i][0] == k] for k in SUBGROUP_KINDS}
        order = [i for k in SUBGROUP_KINDS for i in by_kind[k]]
        order += [i for i in range(len(subgroups)) if i not in order]  # the size-1 ones
        arr = arr.reshape(dims + tuple(s for _, s in subgroups))
        arr = arr.transpose(list(range(nd)) + [nd + i for i in order])
        new_groups = [(k, int(np.prod([subgroups[i][1] for i in by_kind[k]]))) for k in SUBGROUP_KINDS if by_kind[k]]
        arr = arr.reshape(dims + tuple(s for _, s in new_groups))
        if new_groups and new_groups[-1][0] == "replicated":
            arr = np.sort(arr, axis=-1)  # devices of one replication group are interchangeable
        if all(d == 1 for d in dims) and len(new_groups) <= 1:
            # Nothing is tiled: every device holds the whole value.
            return cls(new_groups[0][0]) if new_groups else cls.replicated()
        flat = tuple(int(x) for x in arr.flat)
        return cls("tiled", dims, tuple(new_groups), flat, iota=_find_iota(arr))

    # -- queries -------------------------------------------------------------------
    @property
    def num_devices(self) -> int | None:
        """Devices the tile assignment names (None when any number works)."""
        if self.kind == "tiled":
            return len(self.devices)
        if self.kind == "maximal" and self.device is not None:  # maximal() always sets it
            return self.device + 1
        return None

    def device_array(self) -> np.ndarray:
        assert self.kind == "tiled"
        return np.array(self.devices, dtype=np.int64).reshape(self.tile_dims + tuple(s for _, s in self.subgroups))

    def shard_indices(self, shape: Sequence[int], num_devices: int) -> list[tuple[slice, ...] | None]:
        """The slice of an array of ``shape`` that each logical device holds
        (None: the device holds nothing)."""
        full = tuple(slice(0, s) for s in shape)
        if self.kind in ("replicated", "manual"):
            return [full] * num_devices
        if self.kind == "maximal":
            return [full if d == self.device else None for d in range(num_devices)]
        if len(shape) != len(self.tile_dims):
            raise ValueError(f"sharding {self} tiles {len(self.tile_dims)} dimensions, the array has "
                             f"{len(shape)}: {tuple(shape)}")
        out: list = [None] * num_devices
        arr = self.device_array()
        for coords in np.ndindex(*arr.shape):
            dev = int(arr[coords])
            if dev >= num_devices:
                raise ValueError(f"sharding {self} names device {dev}, only {num_devices} exist")
            idx = []
            for size, parts, c in zip(shape, self.tile_dims, coords):
                chunk = -(-size // parts)  # XLA pads the last tile
                idx.append(slice(min(c * chunk, size), min((c + 1) * chunk, size)))
            out[dev] = tuple(idx)
        return out

    # -- text ------------------------------------------------------------------------
    def __str__(self) -> str:
        if self.kind in ("replicated", "manual"):
            return "{" + self.kind + "}"
        if self.kind == "maximal":
            return f"{{maximal device={self.device:d}}}"
        dims = list(self.tile_dims) + [s for _, s in self.subgroups]
        if self.iota is not None:
            idims, perm = self.iota
            devices = f"<=[{','.join(map(str, idims))}]"
            if len(idims) > 1:
                devices += f"T({','.join(map(str, perm))})"
        else:
            devices = ",".join(map(str, self.devices))
        text = f"{{devices=[{','.join(map(str, dims))}]{devices}"
        kinds = [k for k, _ in self.subgroups]
        if kinds == ["replicated"]:
            text += " last_tile_dim_replicate"
        elif kinds:
            text += " last_tile_dims={" + ", ".join(kinds) + "}"
        return text + "}"

    def __repr__(self) -> str:
        return f"HloSharding({str(self)!r})"


def _find_iota(arr: np.ndarray):
    """Canonical iota (dims, perm) that generates ``arr``, or None.

    Reads the position dimensions from the minor end: each is the longest run
    of equal device-id steps; their steps, sorted, must form a mixed radix.
    """
    flat = arr.reshape(-1)
    n = flat.size
    if n == 1:
        return (1,), (0,)
    runs = []  # (length, device stride) from the minor position dimension up
    block = 1
    while block < n:
        step = int(flat[block] - flat[0])
        length = 1
        while block * length < n and flat[block * length] == flat[0] + length * step:
            length += 1
        if length == 1 or step <= 0 or n % (block * length):
            return None
        runs.append((length, step))
        block *= length
    position_dims = runs[::-1]  # major first
    by_stride = sorted(range(len(position_dims)), key=lambda k: -position_dims[k][1])
    reshape = [position_dims[k][0] for k in by_stride]
    perm = [by_stride.index(k) for k in range(len(position_dims))]
    if not np.array_equal(np.arange(n).reshape(reshape).transpose(perm).reshape(-1), flat):
        return None
    return canonical_iota(reshape, perm)


_TILED = re.compile(r"^\{devices=\[([\d,]+)\]([^\s}]+)(?:\s+(last_tile_dim_replicate|last_tile_dims=\{([^}]*)\}))?\}$")
_IOTA = re.compile(r"^<=\[([\d,]+)\](?:T\(([\d,]+)\))?$")


def parse(text: str) -> HloSharding:
    """Parses an HLO sharding string (XLA's syntax; not tuple shardings)."""
    s = text.strip()
    if s in ("{replicated}", "{manual}"):
        return HloSharding(s[1:-1])
    m = re.fullmatch(r"\{maximal device=(\d+)\}", s)
    if m:
        check_device_count(int(m.group(1)) + 1, f"HLO sharding {text!r}")
        return HloSharding.maximal(int(m.group(1)))
    m = _TILED.match(s)
    if not m:
        raise ValueError(f"cannot parse HLO sharding {text!r}; expected {{replicated}}, {{manual}}, "
                         f"{{maximal device=N}} or {{devices=[...]...}}")
    dims = [int(d) for d in m.group(1).split(",")]
    if m.group(3) == "last_tile_dim_replicate":
        kinds = ["replicated"]
    elif m.group(4) is not None:
        kinds = [k.strip() for k in m.group(4).split(",")]
    else:
        kinds = []
    if len(kinds) >= len(dims) + (0 if kinds else 1):
        raise ValueError(f"HLO sharding {text!r} has more subgroup kinds than dimensions")
    n = math.prod(dims)
    check_device_count(n, f"HLO sharding {text!r}")
    iota = _IOTA.match(m.group(2))
    if iota:
        idims = [int(d) for d in iota.group(1).split(",")]
        perm = [int(p) for p in iota.group(2).split(",")] if iota.group(2) else list(range(len(idims)))
        if math.prod(idims) != n or sorted(perm) != list(range(len(idims))):
            raise ValueError(f"HLO sharding {text!r}: iota {m.group(2)} does not fit {n} devices")
        devices = np.arange(n).reshape(idims).transpose(perm)
    else:
        try:
            devices = np.array([int(x) for x in m.group(2).split(",")])
        except ValueError:
            raise ValueError(f"HLO sharding {text!r}: bad device list {m.group(2)!r}") from None
        if devices.size != n:
            raise ValueError(f"HLO sharding {text!r} lists {devices.size} devices for tile {dims} ({n})")
    tile = dims[: len(dims) - len(kinds)]
    groups = list(zip(kinds, dims[len(tile):]))
    return HloSharding.tiled(tile, devices, groups)


def parse_elements(text: str) -> list[HloSharding]:
    """The shardings of a possibly tuple-shaped HLO sharding string
    (``{{...}, {...}}``: one per tuple element; else one)."""
    s = text.strip()
    if not s.startswith("{{"):
        return [parse(s)]
    if not s.endswith("}"):
        raise ValueError(f"cannot parse HLO sharding {text!r}: unbalanced braces")
    parts, depth, start = [], 0, 1
    for k, c in enumerate(s[1:-1], 1):
        depth += {"{": 1, "}": -1}.get(c, 0)
        if depth < 0:
            raise ValueError(f"cannot parse HLO sharding {text!r}: unbalanced braces")
        if c == "," and depth == 0:
            parts.append(s[start:k])
            start = k + 1
    parts.append(s[start:-1])
    return [parse(part) for part in parts]


# -- encoders: the vocabulary's layouts as HLO shardings ----------------------------------------------

def of_spec(spec: ShardingSpec, special_axes: Mapping[int, str] | None = None) -> HloSharding:
    """The XLA sharding of the *global* array. ``special_axes`` marks
    replicated mesh dimensions as ``"manual"`` (partially manual values)."""
    special_axes = dict(special_axes or {})
    for maxis, kind in special_axes.items():
        if kind not in ("manual", "replicated"):
            raise ShardingSpecError(f"special axis kind must be 'manual' or 'replicated', got {kind!r}")
        if not (0 <= maxis < len(spec.mesh_mapping)) or not isinstance(spec.mesh_mapping[maxis], Replicated):
            raise ShardingSpecError(f"mesh dimension {maxis} is not a Replicated dimension of {spec!r}; "
                                    f"only replicated mesh dimensions can be manual")
    sharded_to_mesh = {a.axis: m for m, a in enumerate(spec.mesh_mapping) if isinstance(a, ShardedAxis)}
    perm: list[int] = []
    tile: list[int] = []
    next_axis = 0
    for dim, s in enumerate(spec.sharding):
        if isinstance(s, Unstacked):
            raise ShardingSpecError(f"dimension {dim} is {s!r}: an HLO sharding cannot drop a dimension; "
                                    f"use Chunked([{s.size}]) (each shard keeps a size-1 dimension)")
        if isinstance(s, NoSharding):
            tile.append(1)
            continue
        for _ in s.chunks:
            perm.append(sharded_to_mesh[next_axis])
            next_axis += 1
        tile.append(int(np.prod(s.chunks)))
    groups = []
    for m, a in enumerate(spec.mesh_mapping):
        if isinstance(a, Replicated):
            perm.append(m)
            groups.append((special_axes.get(m, "replicated"), a.replicas))
    return HloSharding.from_mesh(spec.mesh_shape, perm, tile, groups)


def of_mapping(mesh: AbstractMesh, ndim: int, mapping: Mapping[str, int], manual_axes: Iterable[str] = ()) -> HloSharding:
    """XLA sharding of a global value split by ``mapping``; unmapped axes in
    ``manual_axes`` are manual subgroups, the rest replicated."""
    manual = _check_manual(mesh, manual_axes)
    special = {mesh.axis_names.index(a): "manual" for a in manual if a not in mapping}
    return of_spec(mesh.sharding_spec(ndim, mapping), special)


def manual_tile(mesh: AbstractMesh, ndim: int, manual_axes: Iterable[str]) -> HloSharding:
    """The sharding of a per-device tile inside a region that is manual over
    ``manual_axes`` (and replicated over the other mesh axes)."""
    manual = _check_manual(mesh, manual_axes)
    ordered = [a for a in mesh.axis_names if a in manual]  # mesh order
    others = [a for a in mesh.axis_names if a not in manual]
    perm = [mesh.axis_names.index(a) for a in ordered + others]
    groups = [("manual", int(np.prod([mesh.shape[a] for a in ordered]))),
              ("replicated", int(np.prod([mesh.shape[a] for a in others])))]
    return HloSharding.from_mesh(mesh.axis_sizes, perm, [1] * ndim, groups)


def _check_manual(mesh: AbstractMesh, manual_axes: Iterable[str]) -> set[str]:
    manual = set(manual_axes)
    unknown = sorted(manual - set(mesh.axis_names))
    if unknown:
        raise MeshError(f"manual axis {unknown[0]!r} is not in the mesh; its axes are "
                        f"{', '.join(map(repr, mesh.axis_names))}")
    return manual
