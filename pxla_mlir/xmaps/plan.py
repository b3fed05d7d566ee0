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
from typing import Any, Mapping, Sequence

__all__ = ["XmapError", "XmapTypeError", "XmapMeshError", "Plan", "make_plan", "local_name",
           "check_resource_clash"]


class XmapError(ValueError):
    """An xmap that cannot work as written; the message says which axis or argument."""


class XmapTypeError(XmapError, TypeError):
    """A named-axis typing mistake (2022 raised TypeError/JAXTypeError): a
    malformed axes entry, a resource used twice in one value, an output that
    varies along an axis its out_axes does not place."""


class XmapMeshError(XmapError, RuntimeError):
    """A nested xmap under a different mesh than its enclosing xmap (2022
    raised RuntimeError)."""


def local_name(name: str) -> str:
    return f"{name}@local"


@dataclasses.dataclass(frozen=True)
class Plan:
    names: tuple[str, ...]  # named axes, in first-appearance order
    sizes: Mapping[str, int]  # global sizes
    resources: Mapping[str, tuple]  # mesh axes (major first), then serial loops; () = vectorized
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

    def without_resources(self) -> "Plan":
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


def make_plan(in_axes: Sequence[Mapping[int, str]], in_shapes: Sequence[Sequence[int]], axis_sizes: Mapping,
              axis_resources: Mapping, mesh_shape: Mapping[str, int], paths: Sequence[str],
              loops: Mapping[str, int] = {}, declared: Sequence[str] = ()) -> Plan:
    """``declared``: names the in_axes entries use, in order; a name no
    argument carries (empty containers) needs an axis_sizes entry."""
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
    missing = [n for n in declared if n not in sizes]
    if missing:
        raise XmapError(f"the size of named axis {missing[0]!r} is unknown: no argument carries it (empty "
                        f"containers in place of the arguments in_axes names it for?); give it in axis_sizes")
    unknown = sorted(set(axis_resources) - set(names))
    if unknown:
        raise XmapError(f"axis_resources maps {unknown[0]!r}, which no input carries and axis_sizes does not give")
    resources: dict[str, tuple] = {}
    for n in names:
        r = axis_resources.get(n, ())
        r = (r,) if isinstance(r, str) else tuple(r)
        for a in r:
            if a not in mesh_shape and a not in loops:
                if not mesh_shape:
                    raise XmapError(f"axis_resources maps {n!r} to mesh axis {a!r}, but no mesh is active; "
                                    f"call the xmap inside `with pxla_mlir.Mesh(devices, axis_names):` (or a "
                                    f"jax.sharding.Mesh), or declare a loop with pxla_mlir.serial_loop({a!r}, n)")
                raise XmapError(f"axis_resources maps {n!r} to mesh axis {a!r}, which the current mesh "
                                f"({', '.join(f'{k}={v}' for k, v in mesh_shape.items())}) does not have "
                                f"(and no pxla_mlir.serial_loop({a!r}, n) is in scope)")
        if len(set(r)) != len(r):
            raise XmapError(f"axis_resources maps {n!r} to resource {r[0]!r} twice: {r}")
        first_loop = next((i for i, a in enumerate(r) if a in loops), len(r))
        late_mesh = [a for a in r[first_loop:] if a not in loops]
        if late_mesh:
            raise XmapError(f"axis_resources of {n!r} lists mesh axis {late_mesh[0]!r} after the serial loop "
                            f"{r[first_loop]!r}; put mesh axes first: {tuple(a for a in r if a not in loops)} + "
                            f"{tuple(a for a in r if a in loops)}")
        resources[n] = r
        parts = math.prod(mesh_shape[a] for a in r if a in mesh_shape) * math.prod(loops[a] for a in r if a in loops)
        if sizes[n] % parts:
            looped = any(a in loops for a in r)
            what, unit = ("mesh axes and loops", "chunks in total") if looped else ("mesh axes", "devices")
            raise XmapError(f"named axis {n!r} has size {sizes[n]}, which its {what} {r} ({parts} {unit}) "
                            f"do not divide")
    used = {a for r in resources.values() for a in r}
    return Plan(tuple(names), sizes, resources, dict(mesh_shape), {k: v for k, v in loops.items() if k in used})


def check_resource_clash(resources: Mapping[str, tuple], value_names, what: Any, loops=()) -> None:
    """Two named axes of one value may not share a resource (2022 resource
    typecheck). ``resources``: named axis -> mesh axes and ``loops``."""
    owner: dict[str, str] = {}
    for n in sorted(value_names):
        for a in resources.get(n, ()):
            if a in owner:
                first, second = sorted((owner[a], n))
                kind = "serial loop" if a in loops else "mesh axis"
                raise XmapTypeError(f"named axes {first!r} and {second!r} are both mapped to {kind} {a!r}, but "
                                    f"they coincide in {what() if callable(what) else what}; map them to "
                                    f"different resources")
            owner[a] = n
