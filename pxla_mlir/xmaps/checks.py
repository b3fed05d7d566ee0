"""Named-axis typing of a traced xmap body, across nested xmaps.

* every value (inputs, intermediates, and those of xmaps nested inside) may
  not vary along two named axes that share a resource (2022's resource
  typecheck);
* every output must place each named axis it varies over (out_axes), and its
  out_axes may not put two named axes on one resource;
* a nested xmap may not reuse a name of an enclosing one (shadowing).

Mistakes raise :class:`~.plan.XmapTypeError` (a ``jax.errors.JAXTypeError``,
as 2022's were), its message starting with 2022's words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pxla_mlir.maps.invariance import Names, named_shapes
from pxla_mlir.xmaps.call_site import call_site
from pxla_mlir.xmaps.plan import XmapTypeError, check_resource_clash
from pxla_mlir.xmaps.primitive import names_of

__all__ = ["ResourceTyping", "check_outputs", "show_axes", "xmap_names"]


def show_axes(axes) -> str:
    """Axis names as 2022's messages showed them: ```a`, `b```."""
    return ", ".join(sorted(f"`{a}`" for a in axes))


class ResourceTyping:
    """``on_value`` hook of :func:`pxla_mlir.maps.invariance.named_shapes`: checks
    each value against the resources of every named axis in scope."""

    def __init__(self, resources: Mapping[str, tuple], loops=(), where: str = ""):
        self.resources, self.loops, self.where = dict(resources), set(loops), where

    def __call__(self, eqn, names) -> None:
        check_resource_clash(self.resources, set(names) & set(self.resources), lambda: (
            f"a value returned from a primitive {eqn.primitive.name} created at {call_site(eqn.source_info)}"
            f"{self.where}"), self.loops)

    def inner(self, eqn, body_inputs: Sequence[Names]) -> ResourceTyping:
        """The typing inside a nested xmap equation (whose inputs, with their
        named dimensions, are ``body_inputs``)."""
        p = eqn.params
        inner = dict(p["axis_resources"])
        shadowed = sorted(set(inner) & set(self.resources))
        at = call_site(eqn.source_info)
        if shadowed:
            raise XmapTypeError(f"Detected disallowed xmap axis name shadowing at {at} (shadowed axes: "
                                f"{show_axes(shadowed)}). The xmap {p['name']!r} names axis {shadowed[0]!r}, which "
                                f"an enclosing xmap already names; rename one of them")
        fn = f"an xmapped function {p['name']}" + (f" (xmap called at {at})" if at else "")
        typing = ResourceTyping({**self.resources, **inner}, self.loops | {a for a, _ in p["loops"]},
                                f" (inside {fn})")
        for i, names in enumerate(body_inputs):
            check_resource_clash(typing.resources, set(names) & set(typing.resources),
                                 f"an input to {fn} (input {i})", typing.loops)
        return typing


def check_outputs(resources: Mapping[str, tuple], loops, varies: Sequence[Names], out_specs: Sequence,
                  paths: Sequence[str], fn_name: str, own=None) -> None:
    """Each output places the named axes of this xmap (``own``, default: all
    of ``resources``) it varies over, and its out_axes do not put two named
    axes on one resource. ``out_specs``: per output, ``{dim: name}`` (a
    :class:`~.specs.NamedDims` shows the user's entry) or ``((dim, name), ...)``;
    ``resources`` covers every named axis in scope."""
    known = set(resources)
    own = known if own is None else set(own)
    for path, v, spec in zip(paths, varies, out_specs):
        mapping = dict(spec)
        placed = set(mapping.values())
        missing = sorted((set(v) & own) - placed, key=str)
        if missing:
            shown = getattr(spec, "user_repr", None) or repr(mapping)
            raise XmapTypeError(
                f"One of xmap results has an out_axes specification of {shown}, but is actually mapped along more "
                f"axes defined by this xmap call: {', '.join(map(str, missing))}. Output {path} of {fn_name!r} "
                f"varies along {missing[0]!r}; reduce over {missing[0]!r} first (lax.psum, pmean, all_gather, ...) "
                f"or add it to out_axes")
        varying = set(v) & known
        used = {a for n in varying for a in resources.get(n, ())}
        for b in sorted(placed - varying, key=str):  # broadcast along b: b's resources must be free
            overlap = set(resources.get(b, ())) & used
            if overlap:
                by = {a: n for n in varying for a in resources.get(n, ())}
                partitioning = {by[a] for a in overlap}
                raise XmapTypeError(
                    f"One of xmapped function ({fn_name}) outputs is broadcast along axis `{b}` which is assigned to "
                    f"resources {show_axes(resources[b])}, but the output is already partitioned along "
                    f"{show_axes(overlap)}, because its named shape contains {show_axes(partitioning)}. This is "
                    f"output {path}; map {b!r} and {sorted(partitioning)[0]!r} to different resources")
        users: dict = {}
        for n in sorted(placed | varying, key=str):
            for a in resources.get(n, ()):
                users.setdefault(a, []).append(n)
        for a, names in users.items():
            if len(names) > 1:
                kind = "serial loop" if a in loops else "mesh axis"
                raise XmapTypeError(f"out_axes of output {path} of {fn_name!r} puts named axes {names[0]!r} and "
                                    f"{names[1]!r} on one {kind} {a!r}; map them to different resources")


def xmap_names(eqn, ins, on_value, impure=Names()):
    """invariance rule of a nested xmap: its outputs vary over what its body's
    outputs vary over, less its own names (they become positional); a host
    call in its body varies over ``impure``, as one outside it."""
    p = eqn.params
    body_inputs = [Names(a) | names_of(spec) for a, spec in zip(ins, p["in_axes"])]
    hook = on_value.inner(eqn, body_inputs) if isinstance(on_value, ResourceTyping) else on_value
    outs = named_shapes(p["jaxpr"].jaxpr, body_inputs, hook, impure)
    own = {n for n, _ in p["axis_sizes"]}
    if isinstance(hook, ResourceTyping):
        check_outputs(hook.resources, hook.loops, outs, p["out_axes"], [str(i) for i in range(len(outs))],
                      p["name"], own)
    return [Names(o - own) for o in outs]

