"""xmap's plan: which array dimensions are named axes, their sizes, and the
mesh axes (resources) each named axis is spread over.

A named axis ``n`` of global size ``S`` on resources ``R`` (mesh axes, major
first) runs on ``D = prod(mesh[R])`` devices with a tile of ``T = S / D``
elements per device. Inside the tiled body the name is *substituted* by
``R + (n@local,)``: the global index along ``n`` is ``device_index(R) * T +
local_index`` (the 2022 EvaluationPlan). ``n@local`` is a vmap axis of size
T; it is dropped when T is 1 (a fully spread axis), and it is the whole axis
when R is empty (a vectorized axis).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["XmapError", "Plan", "parse_entry", "make_plan", "local_name"]


class XmapError(ValueError):
    """An xmap that cannot work as written; the message says which axis or argument."""


def local_name(name: str) -> str:
    return f"{name}@local"


def parse_entry(entry, ndim: int, what: str) -> dict[int, str]:
    """``{dim: name}`` or ``['a', ..., 'b']`` -> ``{non-negative dim: name}``."""
    if isinstance(entry, Mapping):
        out = {}
        for d, n in entry.items():
            if not isinstance(d, (int, np.integer)) or not -ndim <= d < ndim:
                raise XmapError(f"{what}: dimension {d!r} (for axis {n!r}) is out of range for rank {ndim}")
            out[int(d) % ndim] = n
    elif isinstance(entry, (list, tuple)):
        entry = list(entry)
        if entry.count(Ellipsis) > 1:
            raise XmapError(f"{what}: at most one ... in {entry!r}")
        if Ellipsis in entry:
            k = entry.index(Ellipsis)
            front, back = entry[:k], entry[k + 1:]
            if len(front) + len(back) > ndim:
                raise XmapError(f"{what}: {entry!r} names more dimensions than the rank {ndim}")
            out = {i: n for i, n in enumerate(front) if n is not None}
            out.update({ndim - len(back) + i: n for i, n in enumerate(back) if n is not None})
        else:
            if len(entry) != ndim:
                raise XmapError(f"{what}: {entry!r} has {len(entry)} entries for rank {ndim}; use ... for the rest")
            out = {i: n for i, n in enumerate(entry) if n is not None}
    else:
        raise XmapError(f"{what}: axes must be a {{dim: name}} dict or a list like ['batch', ...], got {entry!r}")
    names = list(out.values())
    for n in names:
        if not isinstance(n, str) or not n:
            raise XmapError(f"{what}: axis names must be non-empty strings, got {n!r}")
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise XmapError(f"{what}: axis {dup!r} names two dimensions of the same value")
    return out


def out_entry_rank(entry, elem_rank: int) -> int:
    """Rank of an output whose per-element rank is ``elem_rank``."""
    if isinstance(entry, Mapping):
        return elem_rank + len(entry)
    return elem_rank + sum(1 for n in entry if n is not Ellipsis and n is not None)


@dataclasses.dataclass(frozen=True)
class Plan:
    names: tuple[str, ...]  # named axes, in first-appearance order
    sizes: Mapping[str, int]  # global sizes
    resources: Mapping[str, tuple]  # mesh axes per named axis (major first); () = vectorized
    mesh_shape: Mapping[str, int]  # the mesh (name -> size), possibly empty

    def devices_of(self, n: str) -> int:
        return math.prod(self.mesh_shape[a] for a in self.resources[n])

    def tile(self, n: str) -> int:
        return self.sizes[n] // self.devices_of(n)

    def local(self, n: str) -> str | None:
        """The vmap axis that carries ``n``'s tile, or None if the tile is 1."""
        return local_name(n) if (not self.resources[n] or self.tile(n) > 1) else None

    def subst(self, n: str) -> tuple:
        loc = self.local(n)
        return tuple(self.resources[n]) + ((loc,) if loc else ())

    def is_local(self, axis) -> bool:
        return isinstance(axis, str) and axis.endswith("@local")

    def spec_dims(self, axes: Mapping[int, str], ndim: int) -> list[list[str]]:
        """Mesh axes splitting each dimension of a value with named ``axes``."""
        dims: list[list[str]] = [[] for _ in range(ndim)]
        for d, n in axes.items():
            dims[d] = list(self.resources[n])
        return dims

    def tile_shape(self, shape: Sequence[int], axes: Mapping[int, str]) -> tuple[int, ...]:
        shape = list(shape)
        for d, n in axes.items():
            shape[d] //= self.devices_of(n)
        return tuple(shape)


def make_plan(in_axes: Sequence[Mapping[int, str]], in_shapes: Sequence[Sequence[int]], axis_sizes: Mapping,
              axis_resources: Mapping, mesh_shape: Mapping[str, int], paths: Sequence[str]) -> Plan:
    names: list[str] = []
    sizes: dict[str, int] = {}
    origin: dict[str, str] = {}
    for axes, shape, path in zip(in_axes, in_shapes, paths):
        for d, n in sorted(axes.items()):
            if n not in names:
                names.append(n)
            size = shape[d]
            if n in sizes and sizes[n] != size:
                raise XmapError(f"named axis {n!r} has size {sizes[n]} in {origin[n]} but {size} in {path} "
                                f"(dimension {d} of shape {tuple(shape)})")
            sizes.setdefault(n, size)
            origin.setdefault(n, f"{path} (dimension {d} of shape {tuple(shape)})")
    for n, size in dict(axis_sizes).items():
        if n in sizes and sizes[n] != size:
            raise XmapError(f"axis_sizes gives {n!r} size {size}, but {origin[n]} has size {sizes[n]}")
        if n not in names:
            names.append(n)
        sizes[n] = int(size)
    unknown = sorted(set(axis_resources) - set(names))
    if unknown:
        raise XmapError(f"axis_resources maps {unknown[0]!r}, which no input carries and axis_sizes does not give")
    resources: dict[str, tuple] = {}
    for n in names:
        r = axis_resources.get(n, ())
        r = (r,) if isinstance(r, str) else tuple(r)
        for a in r:
            if a not in mesh_shape:
                if not mesh_shape:
                    raise XmapError(f"axis_resources maps {n!r} to mesh axis {a!r}, but no mesh is active; "
                                    f"call the xmap inside `with pxla_mlir.Mesh(devices, axis_names):`")
                raise XmapError(f"axis_resources maps {n!r} to mesh axis {a!r}, which the current mesh "
                                f"({', '.join(f'{k}={v}' for k, v in mesh_shape.items())}) does not have")
        if len(set(r)) != len(r):
            raise XmapError(f"axis_resources maps {n!r} to mesh axis {r[0]!r} twice: {r}")
        resources[n] = r
        devices = math.prod(mesh_shape[a] for a in r)
        if sizes[n] % devices:
            raise XmapError(f"named axis {n!r} has size {sizes[n]}, which its mesh axes {r} ({devices} devices) "
                            f"do not divide")
    return Plan(tuple(names), sizes, resources, dict(mesh_shape))


def check_resource_clash(plan: Plan, value_names: set, what: Any) -> None:
    """Two named axes of one value may not share a mesh axis (2022 resource typecheck)."""
    owner: dict[str, str] = {}
    for n in sorted(value_names):
        for a in plan.resources.get(n, ()):
            if a in owner:
                first, second = sorted((owner[a], n))
                raise XmapError(f"named axes {first!r} and {second!r} are both mapped to mesh axis {a!r}, but they "
                                f"coincide in {what() if callable(what) else what}; map them to different mesh axes")
            owner[a] = n
