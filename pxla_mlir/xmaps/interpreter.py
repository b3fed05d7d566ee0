"""Re-evaluating an xmap body with its named axes substituted.

The user's function is traced once per element, with every named axis at its
global size. To run it on tiles, each named-axis collective is re-bound over
the substituted axes ``plan.subst(name)`` (mesh axes, then the local vmap
axis), inside ``jax.vmap`` over the local axes and under an axis environment
of the mesh axes, by the rule the collective table gives it
(:mod:`pxla_mlir.collectives`, rules in :mod:`.rewrites`). Calls are inlined;
control flow that mentions a named axis is re-traced through the interpreter.
In the global view (``global_view``) every named axis is a vmap axis under its
own name and the rules only decompose what vmap cannot batch (several names,
partial permutations).
"""

from __future__ import annotations

import jax

from ..collectives import CALL_JAXPR_PARAMS, COLLECTIVES, axes_of
from ..jax_internals import core
from .plan import Plan, XmapError

_FORBIDDEN = {"pxla_pmap": "pxla_mlir.pmap", "xla_pmap": "jax.pmap", "shard_map": "jax.shard_map (or jax.pmap)"}


class Substitution:
    """Where each named axis of the body runs."""

    def __init__(self, plan: Plan, global_view: bool):
        self.plan, self.global_view = plan, global_view

    def axes(self, names) -> tuple:
        names = names if isinstance(names, (tuple, list)) else (names,)
        out: list = []
        for n in names:
            if n not in self.plan.sizes:
                out.append(n)  # not ours (e.g. an axis of an enclosing map)
            else:
                out.extend((n,) if self.global_view else self.plan.subst(n))
        return tuple(out)

    def is_local(self, axis) -> bool:
        return axis in self.plan.sizes if self.global_view else self.plan.is_local(axis)

    def mentions(self, eqn) -> bool:
        """Does the equation (or a jaxpr inside it) use one of our names?"""
        if any(n in self.plan.sizes for n in axes_of(eqn)):
            return True
        return any(self.mentions(e) for sub in core.jaxprs_in_params(eqn.params) for e in _jaxpr(sub).eqns)


def _jaxpr(sub):
    return sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub


def interpret(sub: Substitution, jaxpr: core.Jaxpr, consts, *args) -> list:
    env: dict = {}

    def read(v):
        return v.val if isinstance(v, core.Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        outs = _eval(sub, eqn, [read(v) for v in eqn.invars])
        if eqn.primitive.multiple_results:
            env.update(zip(eqn.outvars, outs))
        else:
            env[eqn.outvars[0]] = outs
    return [read(v) for v in jaxpr.outvars]


def _eval(sub: Substitution, eqn, ins):
    p, params = eqn.primitive, dict(eqn.params)
    if p.name in _FORBIDDEN:
        raise XmapError(f"{_FORBIDDEN[p.name]} cannot be nested inside xmap; use a named axis of the xmap instead")
    if params.get("axis_index_groups") is not None and sub.mentions(eqn):
        raise XmapError(f"{p.name} with axis_index_groups over an xmap named axis is not supported")
    entry = COLLECTIVES.get(p.name)
    if entry is not None and entry.xmap is not None:
        return entry.xmap(sub, p, params, ins)
    if p.name in CALL_JAXPR_PARAMS and CALL_JAXPR_PARAMS[p.name] in params:
        inner = params[CALL_JAXPR_PARAMS[p.name]]
        consts = inner.consts if isinstance(inner, core.ClosedJaxpr) else ()
        return interpret(sub, _jaxpr(inner), consts, *ins)  # inlined (forward evaluation)
    if core.jaxprs_in_params(params) and sub.mentions(eqn):
        # Control flow: re-trace each body through the interpreter here (inside
        # the vmaps and the mesh axis env), then bind with the new bodies.
        new = {k: _retrace(sub, v) for k, v in params.items()}
        return p.bind(*ins, **p.get_bind_params(new))
    return p.bind(*ins, **p.get_bind_params(params))


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
    if new.consts:
        raise XmapError("a collective over an xmap named axis inside control flow (cond/while/scan) needs "
                        "constant tables here (ppermute/all_to_all over a tiled axis), which is not supported")
    return new if isinstance(value, core.ClosedJaxpr) else new.jaxpr
