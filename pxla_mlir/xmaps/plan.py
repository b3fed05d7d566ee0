"""Named axes, their sizes and resources: how an xmap spreads each named axis.

A named axis ``n`` of global size ``S`` with resources ``R`` runs over the
devices of its mesh axes (``D = prod(mesh[a] for a in R)``, major first),
then over its serial loops (``L = prod(length of l in R)``), with a chunk of
``T = S / (D * L)`` elements vectorized on each device per loop iteration.
Inside the tiled body the name is *substituted* by ``R + (n@local,)``: the
global index along ``n`` is ``(device_index(R_mesh) * L + loop_index) * T +
local_index`` (the 2022 EvaluationPlan). ``n@local`` is a vmap axis of size
T; it is dropped when T is 1 and the axis has resources, and it is the whole
axis when R is empty (a vectorized axis).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from jax.errors import JAXTypeError

from pxla_mlir.errors import PxlaUserError

__all__ = ["XmapError", "XmapTypeError", "XmapMeshError", "XmapUnsupportedError", "Plan", "make_plan",
           "local_name", "check_resource_clash", "set_repr"]


class XmapError(PxlaUserError, ValueError):
    """An xmap that cannot work as written; the message starts with 2022's
    words, then says which axis or argument and how to fix it."""


class XmapTypeError(XmapError, JAXTypeError):
    """A named-axis typing mistake (2022 raised TypeError/JAXTypeError): a
    malformed axes entry, a resource used twice in one value, an output that
    varies along an axis its out_axes does not place."""


class XmapMeshError(XmapError, RuntimeError):
    """A nested xmap under a different mesh than its enclosing xmap (2022
    raised RuntimeError)."""


class XmapUnsupportedError(XmapError, NotImplementedError):
    """What 2022's xmap did not implement either (it raised NotImplementedError, or
    RuntimeError for a pmap nested inside an xmap: NotImplementedError is one)."""


def local_name(name: str) -> str:
    return f"{name}@local"


@dataclasses.dataclass(frozen=True)
class Plan:
    names: tuple[str, ...]  # named axes, in first-appearance order
    sizes: Mapping[str, int]  # global sizes
    resources: Mapping[str, tuple[str, ...]]  # mesh axes (major first), then serial loops; () = vectorized
    mesh_shape: Mapping[str, int]  # the mesh (name -> size), possibly empty
    loops: Mapping[str, int] = dataclasses.field(default_factory=dict)  # serial loop -> length

    def mesh_resources(self, n: str) -> tuple:
        return tuple(r for r in self.resources[n] if r in self.mesh_shape)

    def loop_resources(self, n: str) -> tuple:
        return tuple(r for r in self.resources[n] if r in self.loops)

    def devices_of(self, n: str) -> int:
        return math.prod(self.mesh_shape[a] for a in self.mesh_resources(n))

    def loop_count(self, n: str) -> int:
        return math.prod(self.loops[a] for a in self.loop_resources(n))

    def tile(self, n: str) -> int:
        """Elements of ``n`` on one device."""
        return self.sizes[n] // self.devices_of(n)

    def chunk(self, n: str) -> int:
        """Elements of ``n`` one loop iteration of one device works on."""
        return self.tile(n) // self.loop_count(n)

    def local(self, n: str) -> str | None:
        """The vmap axis that carries ``n``'s chunk, or None if it is 1 (a
        named axis of size 0 keeps one of size 0: every device gets an empty tile)."""
        return local_name(n) if (not self.resources[n] or self.chunk(n) != 1) else None

    def subst(self, n: str) -> tuple:
        loc = self.local(n)
        return tuple(self.resources[n]) + ((loc,) if loc else ())

    def is_local(self, axis) -> bool:
        return isinstance(axis, str) and axis.endswith("@local")

    @property
    def used_loops(self) -> tuple:
        """The serial loops this xmap iterates, in order of first use."""
        seen: list = []
        for n in self.names:
            seen += [r for r in self.loop_resources(n) if r not in seen]
        return tuple(seen)

    @property
    def uses_mesh(self) -> bool:
        return any(self.mesh_resources(n) for n in self.names)

    def without_resources(self) -> Plan:
        """The same named axes, all vectorized (the global view on one device)."""
        return Plan(self.names, self.sizes, {n: () for n in self.names}, {}, {})

    def spec_dims(self, axes: Mapping[int, str], ndim: int) -> list[list[str]]:
        """Mesh axes splitting each dimension of a value with named ``axes``."""
        dims: list[list[str]] = [[] for _ in range(ndim)]
        for d, n in axes.items():
            dims[d] = list(self.mesh_resources(n))
        return dims

    def tile_shape(self, shape: Sequence[int], axes: Mapping[int, str]) -> tuple[int, ...]:
        shape = list(shape)
        for d, n in axes.items():
            shape[d] //= self.devices_of(n)
        return tuple(shape)


def set_repr(items) -> str:
    """A set as 2022's messages printed it (``{'x'}``), in a stable order."""
    return "{" + ", ".join(repr(i) for i in sorted(items, key=str)) + "}"


def make_plan(in_axes: Sequence[Mapping[int, str]], in_shapes: Sequence[Sequence[int]], axis_sizes: Mapping,
              axis_resources: Mapping, mesh_shape: Mapping[str, int], paths: Sequence[str],
              loops: Mapping[str, int] = {}, declared: Sequence[str] = ()) -> Plan:
    """``declared``: names the in_axes entries use, in order; a name no
    argument carries (empty containers) needs an axis_sizes entry. Checks run
    in 2022's order: resources in scope, axis_sizes divisible, sizes the
    arguments imply, every size known."""
    resources = {n: (r,) if isinstance(r, str) else tuple(r) for n, r in axis_resources.items()}
    _check_in_scope(resources, mesh_shape, loops)
    for n, r in resources.items():
        if len(set(r)) != len(r):
            raise XmapError(f"Resource assignment of a single axis must be a tuple of distinct resources, but "
                            f"specified {r} for axis {n}. List each mesh axis or loop once")
        first_loop = next((i for i, a in enumerate(r) if a in loops), len(r))
        late_mesh = [a for a in r[first_loop:] if a not in loops]
        if late_mesh:
            raise XmapUnsupportedError(
                f"Loop resources cannot appear before mesh axes in the resource_axis argument. axis_resources of "
                f"{n!r} lists mesh axis {late_mesh[0]!r} after the serial loop {r[first_loop]!r}; put mesh axes "
                f"first: {tuple(a for a in r if a not in loops) + tuple(a for a in r if a in loops)}")
    names: list[str] = []
    sizes: dict[str, int] = {n: int(s) for n, s in dict(axis_sizes).items()}
    origin: dict[str, str] = {n: "axis_sizes" for n in sizes}
    for n in sizes:
        _check_divisible(n, sizes[n], resources.get(n, ()), mesh_shape, loops)
    for axes, shape, path in zip(in_axes, in_shapes, paths):
        for d, n in sorted(axes.items()):
            if n not in names:
                names.append(n)
            size = shape[d]
            if n in sizes and sizes[n] != size:
                spec = getattr(axes, "user_repr", None) or repr(dict(axes))
                raise XmapError(f"The size of axis {n} was previously inferred to be {sizes[n]}, but found an "
                                f"argument of shape {tuple(shape)} with in_axes specification {spec}. Shape mismatch "
                                f"occurs in dimension {d}: {size} != {sizes[n]}. This is argument {path}; {n!r} got "
                                f"its size from {origin[n]}; give every argument the same size along {n!r}")
            sizes.setdefault(n, size)
            origin.setdefault(n, f"{path} (dimension {d} of shape {tuple(shape)})")
    names += [n for n in sizes if n not in names]
    missing = [n for n in declared if n not in sizes]
    if missing:
        raise XmapError(f"Failed to infer size of axes: {', '.join(map(str, missing))}. You've probably passed in "
                        f"empty containers in place of arguments that had those axes in their in_axes. Provide the "
                        f"sizes of missing axes explicitly via axis_sizes to fix this error.")
    unknown = set(resources) - set(names)
    if unknown:
        raise XmapError(f"All axes that were assigned resources have to appear in in_axes or axis_sizes, but the "
                        f"following are missing: {set_repr(unknown)}. No input carries them and axis_sizes does not "
                        f"give them")
    for n in names:
        resources.setdefault(n, ())
        if n not in axis_sizes:
            _check_divisible(n, sizes[n], resources[n], mesh_shape, loops)
    used = {a for r in resources.values() for a in r}
    return Plan(tuple(names), sizes, {n: resources[n] for n in names}, dict(mesh_shape),
                {k: v for k, v in loops.items() if k in used})


def _check_in_scope(resources: Mapping[str, tuple], mesh_shape: Mapping[str, int], loops: Mapping[str, int]):
    missing = {a for r in resources.values() for a in r if a not in mesh_shape and a not in loops}
    if not missing:
        return
    n, a = next((n, a) for n, r in resources.items() for a in r if a in missing)
    head = (f"In-scope resources are insufficient to execute the xmapped function. The missing resources are: "
            f"{set_repr(missing)}")
    if not mesh_shape:
        raise XmapError(f"{head}. axis_resources maps {n!r} to mesh axis {a!r}, but no mesh is active; call the "
                        f"xmap inside `with pxla_mlir.Mesh(devices, axis_names):` (or a jax.sharding.Mesh), or "
                        f"declare a loop with pxla_mlir.serial_loop({a!r}, n)")
    raise XmapError(f"{head}. axis_resources maps {n!r} to mesh axis {a!r}, which the current mesh "
                    f"({', '.join(f'{k}={v}' for k, v in mesh_shape.items())}) does not have (and no "
                    f"pxla_mlir.serial_loop({a!r}, n) is in scope)")


def _check_divisible(n: str, size: int, r: tuple, mesh_shape: Mapping[str, int], loops: Mapping[str, int]) -> None:
    devices = math.prod(mesh_shape[a] for a in r if a in mesh_shape)
    iterations = math.prod(loops[a] for a in r if a in loops)
    if size % (devices * iterations):
        parts = " and ".join(p for p in (f"{devices} devices" if devices > 1 else "",
                                          f"{iterations} loop iterations" if iterations > 1 else "") if p)
        raise XmapError(f"Size of axis {n} ({size}) is not divisible by the total number of resources assigned to "
                        f"this axis ({r}, {devices * iterations} in total). Named axis {n!r} is split over {parts}; "
                        f"give it a size that {devices * iterations} divides, or fewer resources")


def check_resource_clash(resources: Mapping[str, tuple], value_names, what: Any, loops=()) -> None:
    """Two named axes of one value may not share a resource (2022's
    resource_typecheck). ``resources``: named axis -> mesh axes and
    ``loops``; ``what``: the value, in 2022's words (or a thunk)."""
    owner: dict[str, str] = {}
    for n in sorted(value_names, key=str):
        for a in resources.get(n, ()):
            if a in owner:
                first, second = sorted((str(owner[a]), str(n)))
                kind = "serial loop" if a in loops else "mesh axis"
                raise XmapTypeError(f"Axes `{first}` and `{second}` are both mapped to the resource `{a}`, but "
                                    f"they coincide in the named_shape of {what() if callable(what) else what}. A "
                                    f"value cannot be split along one {kind} twice: map {first!r} and {second!r} to "
                                    f"different resources")
            owner[a] = n
