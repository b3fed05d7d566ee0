"""Named-axis typing of a traced xmap body, across nested xmaps.

* every value (inputs, intermediates, and those of xmaps nested inside) may
  not vary along two named axes that share a resource (2022's resource
  typecheck);
* every output must place each named axis it varies over (out_axes), and its
  out_axes may not put two named axes on one resource;
* a nested xmap may not reuse a name of an enclosing one (shadowing).

Mistakes raise :class:`~.plan.XmapTypeError` (a TypeError, as 2022's
JAXTypeError was).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ..invariance import Names, named_shapes
from ..jax_internals import source_info_util
from .plan import XmapTypeError, check_resource_clash
from .primitive import names_of

__all__ = ["ResourceTyping", "check_outputs", "xmap_names"]


class ResourceTyping:
    """``on_value`` hook of :func:`pxla_mlir.invariance.named_shapes`: checks
    each value against the resources of every named axis in scope."""

    def __init__(self, resources: Mapping[str, tuple], loops=(), where: str = ""):
        self.resources, self.loops, self.where = dict(resources), set(loops), where

    def __call__(self, eqn, names) -> None:
        check_resource_clash(self.resources, set(names) & set(self.resources), lambda: (
            f"a value computed by {eqn.primitive.name} at {source_info_util.summarize(eqn.source_info)}"
            f"{self.where}"), self.loops)

    def inner(self, eqn, body_inputs: Sequence[Names]) -> "ResourceTyping":
        """The typing inside a nested xmap equation (whose inputs, with their
        named dimensions, are ``body_inputs``)."""
        p = eqn.params
        inner = dict(p["axis_resources"])
        shadowed = sorted(set(inner) & set(self.resources))
        where = f"the xmap {p['name']!r}"
        at = source_info_util.summarize(eqn.source_info)
        where += f" called at {at}" if at else " nested in an enclosing xmap"
        if shadowed:
            raise XmapTypeError(f"{where} names axis {shadowed[0]!r}, which an enclosing xmap already names "
                                f"(disallowed shadowing); rename one of them")
        typing = ResourceTyping({**self.resources, **inner}, self.loops | {a for a, _ in p["loops"]},
                                f" (inside {where})")
        for i, names in enumerate(body_inputs):
            check_resource_clash(typing.resources, set(names) & set(typing.resources),
                                 f"input {i} of {where}", typing.loops)
        return typing


def check_outputs(resources: Mapping[str, tuple], loops, varies: Sequence[Names], out_specs: Sequence,
                  paths: Sequence[str], fn_name: str, own=None) -> None:
    """Each output places the named axes of this xmap (``own``, default: all
    of ``resources``) it varies over, and its out_axes do not put two named
    axes on one resource. ``out_specs``: per output, ``((dim, name), ...)``;
    ``resources`` covers every named axis in scope."""
    known = set(resources)
    own = known if own is None else set(own)
    for path, v, spec in zip(paths, varies, out_specs):
        placed = names_of(spec)
        missing = sorted((set(v) & own) - placed, key=str)
        if missing:
            raise XmapTypeError(
                f"output {path} of {fn_name!r} varies along named axis {missing[0]!r}, but its out_axes "
                f"{dict(spec) or {}} does not place {missing[0]!r} in it; reduce over {missing[0]!r} first "
                f"(lax.psum, pmean, all_gather, ...) or add it to out_axes")
        varying = set(v) & known
        users: dict = {}
        for n in sorted(placed | varying, key=str):
            for a in resources.get(n, ()):
                users.setdefault(a, []).append(n)
        for a, names in users.items():
            if len(names) < 2:
                continue
            kind = "serial loop" if a in loops else "mesh axis"
            partitioned = [n for n in names if n in varying]
            broadcast = [n for n in names if n not in varying]
            if partitioned and broadcast:
                raise XmapTypeError(
                    f"output {path} of {fn_name!r} is broadcast along named axis {broadcast[0]!r}, which is mapped "
                    f"to {kind} {a!r}, but the output is already partitioned along {a!r} because it varies along "
                    f"{partitioned[0]!r}; map {broadcast[0]!r} and {partitioned[0]!r} to different resources")
            raise XmapTypeError(f"out_axes of output {path} of {fn_name!r} puts named axes {names[0]!r} and "
                                f"{names[1]!r} on one {kind} {a!r}; map them to different resources")


def xmap_names(eqn, ins, on_value):
    """invariance rule of a nested xmap: its outputs vary over what its body's
    outputs vary over, less its own names (they become positional)."""
    p = eqn.params
    body_inputs = [Names(a) | names_of(spec) for a, spec in zip(ins, p["in_axes"])]
    hook = on_value.inner(eqn, body_inputs) if isinstance(on_value, ResourceTyping) else on_value
    outs = named_shapes(p["jaxpr"].jaxpr, body_inputs, hook)
    own = {n for n, _ in p["axis_sizes"]}
    if isinstance(hook, ResourceTyping):
        check_outputs(hook.resources, hook.loops, outs, p["out_axes"], [str(i) for i in range(len(outs))],
                      p["name"], own)
    return [Names(o - own) for o in outs]

