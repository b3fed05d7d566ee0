"""Re-evaluating an xmap body with its named axes substituted.

The user's function is traced once per element, with every named axis at its
global size. To run it on tiles, each named-axis collective is re-bound over
the substituted axes ``plan.subst(name)`` (mesh axes, serial loops, then the
local vmap axis), inside ``jax.vmap`` over the local axes and under an axis
environment of the mesh axes, by the rule the collective table gives it
(:mod:`pxla_mlir.mlir.collectives`, rules in :mod:`.rewrites`). Calls are inlined;
control flow that mentions a named axis is re-traced through the interpreter
with jax's own ``lax.scan``/``while_loop``/``switch`` (so constant tables the
rules need become ordinary closures); a nested xmap is evaluated in place
(:mod:`.body_programs`). In the global view (``global_view``) every named axis is a
vmap axis under its own name and the rules only decompose what vmap cannot
batch (several names, partial permutations).

A nested xmap's body also names the axes of the xmaps around it: its
substitution falls back to theirs (``parent``).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from jax import lax

from pxla_mlir.jaxbridge.jax_internals import core
from pxla_mlir.jaxbridge.jaxpr_protocols import scan_counts
from pxla_mlir.maps import registry
from pxla_mlir.maps.invariance import Names, value_names
from pxla_mlir.mlir.collectives import CALL_JAXPR_PARAMS, axes_of
from pxla_mlir.xmaps import rewrites
from pxla_mlir.xmaps.constraints import constrain
from pxla_mlir.xmaps.plan import Plan, XmapError, XmapUnsupportedError

if TYPE_CHECKING:
    from jax.extend.core import Jaxpr

#: jax's own maps, which cannot nest inside an xmap (nor can pxla_mlir's other map kinds).
_JAX_MAPS = {"xla_pmap": "jax.pmap", "shard_map": "jax.shard_map (or jax.pmap)"}
XMAP_PRIMITIVE = "pxla_xmap"
#: Evaluates an xmap nested in the body: ``nested(sub, params, ins)``, set by :mod:`.body_programs`.
_nested: list = []


def register_nested(evaluate) -> None:
    _nested[:] = [evaluate]


@functools.cache
def _other_maps() -> dict[str, str]:
    """The API of every map that is not an xmap, by its primitive's name."""
    others = {k.primitive.name: f"pxla_mlir.{k.name}" for k in registry.kinds() if k.primitive.name != XMAP_PRIMITIVE}
    return {**_JAX_MAPS, **others}


class Substitution:
    """Where each named axis of the body runs.

    ``loop_index``: inside one iteration of the serial loops, the iteration
    of each loop (loops are then not axes, only axis_index may name them);
    ``mesh_vmapped``: the mesh axes are vmap axes too (the global view of a
    looped xmap), so collectives over them must be decomposed like local ones;
    ``fixed``: in the global view, every intermediate is constrained to the
    layout its named axes have (``ensure_fixed_sharding``).
    """

    def __init__(self, plan: Plan, global_view: bool, parent: Substitution | None = None,
                 loop_index: dict | None = None, mesh_vmapped: bool = False, fixed: bool = False):
        self.plan, self.global_view, self.parent = plan, global_view, parent
        self.loop_index, self.mesh_vmapped = loop_index, mesh_vmapped
        self.fixed = global_view and (fixed or (parent is not None and parent.fixed))
        self.untiled: dict = {}  # id(value gathered from a nested xmap) -> (value, its tile, layout)

    def with_loop_index(self, loop_index: dict | None) -> Substitution:
        return Substitution(self.plan, self.global_view, self.parent, loop_index, self.mesh_vmapped, self.fixed)

    def vmapped_layout(self, vectorized) -> tuple:
        """(named axis, its mesh axes) for the named axes of this global view
        and those around it, each a jax.vmap axis; a vectorized named axis
        gets ``vectorized`` (() replicated, None left to XLA)."""
        outer = self.parent.vmapped_layout(vectorized) if self.parent is not None else ()
        return outer + tuple((n, self.plan.mesh_resources(n) or vectorized) for n in self.plan.names)

    def scope(self) -> list:
        """(name, global size) of every named axis this substitution and its
        parents rewrite: the axis environment a body of theirs is traced in."""
        outer = self.parent.scope() if self.parent is not None else []
        return outer + [(n, self.plan.sizes[n]) for n in self.plan.names]

    def owns(self, name) -> bool:
        return name in self.plan.sizes or (self.parent is not None and self.parent.owns(name))

    def axes(self, names) -> tuple:
        names = names if isinstance(names, (tuple, list)) else (names,)
        out: list = []
        for n in names:
            if n in self.plan.sizes:
                out.extend((n,) if self.global_view else self.plan.subst(n))
            elif self.parent is not None:
                out.extend(self.parent.axes(n))
            else:
                out.append(n)  # not ours (e.g. an axis of an enclosing pmap or vmap)
        return tuple(out)

    def is_local(self, axis) -> bool:
        """Is ``axis`` a vmap axis (not a device axis)?"""
        if self.global_view and axis in self.plan.sizes:
            return True
        if self.plan.is_local(axis) or axis in self.plan.loops:
            return True
        if self.mesh_vmapped and axis in self.plan.mesh_shape:
            return True
        return self.parent.is_local(axis) if self.parent is not None else False

    def loop_value(self, axis):
        """The current iteration of serial loop ``axis`` and its length, or None."""
        if self.loop_index is not None and axis in self.loop_index:
            return self.loop_index[axis], self.plan.loops[axis]
        return self.parent.loop_value(axis) if self.parent is not None else None

    def index(self, names):
        """The linear index along ``names`` (major first), as axis_index."""
        axes = self.axes(names)
        loops = [self.loop_value(a) for a in axes]
        if all(v is None for v in loops):
            return lax.axis_index(axes[0] if len(axes) == 1 else axes)
        index = jnp.int32(0)
        for a, v in zip(axes, loops):
            if v is None:
                index = index * lax.axis_size(a) + lax.axis_index(a)
            else:
                index = index * v[1] + v[0]
        return index

    def mentions(self, eqn) -> bool:
        """Does the equation (or a jaxpr inside it) use an axis this
        substitution rewrites, or hold a nested xmap?"""
        if eqn.primitive.name == XMAP_PRIMITIVE or any(self.owns(n) for n in axes_of(eqn)):
            return True
        return any(self.mentions(e) for sub in core.jaxprs_in_params(eqn.params) for e in _jaxpr(sub).eqns)


def _jaxpr(sub):
    return sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub


def interpret(sub: Substitution, jaxpr: Jaxpr, consts, *args, names: list | None = None) -> list:
    """``names``: the named axes of this xmap each input varies over (None:
    not known), so a reduction of a value that does not vary over one of them
    needs no collective."""
    env: dict = {}
    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    varies = None
    if names is not None:  # a host call may differ from device to device: it varies over every name
        varies = value_names(jaxpr, list(names), impure=Names(sub.plan.sizes))
    run_eqns(sub, jaxpr.eqns, env, varies)
    return [read(env, v) for v in jaxpr.outvars]


def read(env: dict, v):
    return v.val if isinstance(v, core.Literal) else env[v]


def run_eqns(sub: Substitution, eqns, env: dict, varies: dict | None = None) -> None:
    """Evaluates ``eqns`` in ``env`` (var -> value), adding their outputs;
    ``varies``: var -> the named axes it may vary over, when known."""
    for eqn in eqns:
        outs = _eval(sub, eqn, [read(env, v) for v in eqn.invars], varies)
        if sub.fixed:
            outs = _fixed(sub, outs, eqn.primitive.multiple_results)
        if eqn.primitive.multiple_results:
            env.update(zip(eqn.outvars, outs))
        else:
            env[eqn.outvars[0]] = outs


def _eval(sub: Substitution, eqn, ins, varies: dict | None = None):
    p, params = eqn.primitive, dict(eqn.params)
    if varies is not None and p.name in rewrites.REDUCTIONS and params.get("axis_index_groups") is None:
        operand_names = [_names_of(varies, v) for v in eqn.invars]
        invariant = tuple(n for n in params["axes"] if n in sub.plan.sizes
                          and not any(n in names for names in operand_names))
        if invariant:
            return rewrites.reduce_invariant(sub, p, params, ins, invariant)
    rule = rewrites.RULES.get(p.name)
    if rule is not None:
        return rule(sub, p, params, ins)
    if p.name == XMAP_PRIMITIVE:
        return _nested[0](sub, params, ins)
    other = _other_maps().get(p.name)
    if other is not None:
        raise XmapUnsupportedError(f"Nesting pmap inside xmaps not supported! (a {other} inside the body of an "
                                   f"xmap); use a named axis of the xmap instead")
    if p.name in CALL_JAXPR_PARAMS and CALL_JAXPR_PARAMS[p.name] in params:
        inner = params[CALL_JAXPR_PARAMS[p.name]]
        consts = inner.consts if isinstance(inner, core.ClosedJaxpr) else ()
        inner_names = None if varies is None else [_names_of(varies, v) for v in eqn.invars]
        return interpret(sub, _jaxpr(inner), consts, *ins, names=inner_names)  # inlined (forward evaluation)
    if core.jaxprs_in_params(params) and (sub.mentions(eqn) or (sub.fixed and p.name in _CONTROL_FLOW)):
        rule = _CONTROL_FLOW.get(p.name)
        if rule is not None:
            return rule(sub, params, ins)
        new = {k: _retrace(sub, v) for k, v in params.items()}
        return p.bind(*ins, **p.get_bind_params(new))
    return p.bind(*ins, **p.get_bind_params(params))


def _names_of(varies: dict, atom) -> Names:
    return Names() if isinstance(atom, core.Literal) else varies.get(atom, Names())


def _fixed(sub: Substitution, outs, multiple: bool):
    """Each result laid out as its named axes are (2022's
    ``_fix_inferred_spmd_sharding``): replicated but for the vmapped named
    dimensions, which sit on their mesh axes (vectorized ones: XLA's choice)."""
    layout, mesh = sub.vmapped_layout(None), sub.plan.mesh_shape
    fix = lambda y: constrain(y, [()] * jnp.ndim(y), layout, mesh)  # noqa: E731
    return [fix(y) for y in outs] if multiple else fix(outs)


def _run(sub: Substitution, closed, *args) -> list:
    closed = closed if isinstance(closed, core.ClosedJaxpr) else core.ClosedJaxpr(closed, ())
    return interpret(sub, closed.jaxpr, closed.consts, *args)


# Control flow is re-traced through jax's own API: the rules may close over
# constant tables (ppermute/all_to_all over a tiled axis, axis_index_groups).

def _scan(sub, p, ins):
    nc, ncarry = scan_counts(p)
    consts, init, xs = ins[:nc], ins[nc:nc + ncarry], ins[nc + ncarry:]

    def step(carry, x):
        outs = _run(sub, p["jaxpr"], *consts, *carry, *x)
        return outs[:ncarry], outs[ncarry:]

    carry, ys = lax.scan(step, list(init), list(xs), length=p["length"], reverse=p["reverse"], unroll=p["unroll"])
    return [*carry, *ys]


def _while(sub, p, ins):
    cc, bc = p["cond_nconsts"], p["body_nconsts"]
    cond_consts, body_consts, init = ins[:cc], ins[cc:cc + bc], ins[cc + bc:]
    out = lax.while_loop(lambda c: _run(sub, p["cond_jaxpr"], *cond_consts, *c)[0],
                         lambda c: tuple(_run(sub, p["body_jaxpr"], *body_consts, *c)), tuple(init))
    return list(out)


def _cond(sub, p, ins):
    branches = [functools.partial(lambda b, *a: tuple(_run(sub, b, *a)), b) for b in p["branches"]]
    return list(lax.switch(ins[0], branches, *ins[1:]))


_CONTROL_FLOW = {"scan": _scan, "while": _while, "cond": _cond}


def _retrace(sub: Substitution, value):
    if isinstance(value, (tuple, list)):
        if value and all(isinstance(v, (core.ClosedJaxpr, core.Jaxpr)) for v in value):
            return type(value)(_retrace(sub, v) for v in value)
        return value
    if not isinstance(value, (core.ClosedJaxpr, core.Jaxpr)):
        return value
    closed = value if isinstance(value, core.ClosedJaxpr) else core.ClosedJaxpr(value, ())
    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    new = jax.make_jaxpr(lambda *a: interpret(sub, closed.jaxpr, closed.consts, *a))(*avals)
    if new.consts and not isinstance(value, core.ClosedJaxpr):
        raise XmapError(f"a collective over an xmap named axis inside a higher-order primitive needs constant "
                        f"tables, which that primitive cannot carry ({math.prod(c.size for c in new.consts)} "
                        f"constant elements)")
    return new if isinstance(value, core.ClosedJaxpr) else new.jaxpr
