"""Which named axes each value of a map body may vary over.

A value *varies* over a named axis if it is computed from an input mapped
along it, from ``axis_index`` of it, or from a collective over it that mixes
devices without making them agree (ppermute, all_to_all, reduce_scatter, or
a collective restricted to ``axis_index_groups``), or from a host call
whose result may differ per call (``io_callback``: it varies over every axis
in ``impure``). ``psum``/``pmax``/``pmin``
and ``all_gather`` over an axis make a value invariant along it. Calls (jit,
custom derivatives, checkpoint) are analysed inside; other higher-order
primitives (control flow, nested maps) are conservative: their outputs vary
over every axis an input varies over and every axis their body uses, unless
:data:`MAP_RULES` has a rule for them (xmap registers its own).

pmap uses it to accept ``out_axes=None`` only for provably invariant outputs
(2022 pmap silently returned device 0's value: jax issue #21671); xmap to
check that every output places each axis it varies over, and to type-check
mesh resources.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeAlias

from pxla_mlir.jaxbridge.jax_internals import core
from pxla_mlir.jaxbridge.jaxpr_protocols import scan_counts
from pxla_mlir.mlir.collectives import CALL_JAXPR_PARAMS, COLLECTIVES, axes_of

if TYPE_CHECKING:
    from jax.extend.core import Jaxpr

Names: TypeAlias = frozenset

#: Host calls whose results may differ from call to call (device to device).
IMPURE = ("io_callback",)
#: Precise rules for map primitives: ``rule(eqn, input names, on_value,
#: impure)`` -> output names (registered by the maps themselves, to keep
#: this module free of them).
MAP_RULES: dict[str, Callable] = {}


def _jaxpr(sub):
    return sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub


def _mentioned(jaxpr) -> set:
    found: set = set()
    for eqn in jaxpr.eqns:
        found.update(axes_of(eqn))
        for sub in core.jaxprs_in_params(eqn.params):
            found |= _mentioned(_jaxpr(sub))
    return found


def _impure(jaxpr) -> bool:
    return any(eqn.primitive.name in IMPURE or any(_impure(_jaxpr(sub)) for sub in core.jaxprs_in_params(eqn.params))
               for eqn in jaxpr.eqns)


def named_shapes(jaxpr: Jaxpr, inputs: list[Names],
                 on_value: Callable[[object, Names], None] | None = None, impure: Names = frozenset()) -> list[Names]:
    """The names each output of ``jaxpr`` may vary over, given the inputs'.
    ``on_value(eqn, names)`` is called for every value an equation produces;
    the results of impure host calls vary over ``impure``."""
    env = value_names(jaxpr, inputs, on_value, impure)
    return [Names() if isinstance(v, core.Literal) else env.get(v, Names()) for v in jaxpr.outvars]


def value_names(jaxpr: Jaxpr, inputs: list[Names],
                on_value: Callable[[object, Names], None] | None = None, impure: Names = frozenset()) -> dict:
    """The names every variable of ``jaxpr`` may vary over (var -> names)."""
    env: dict = dict(zip(jaxpr.invars, inputs))

    def names_of(atom) -> Names:
        return Names() if isinstance(atom, core.Literal) else env.get(atom, Names())

    for eqn in jaxpr.eqns:
        ins = [names_of(v) for v in eqn.invars]
        union = Names().union(*ins)
        axes = set(axes_of(eqn))
        name = eqn.primitive.name
        if axes and name not in CALL_JAXPR_PARAMS:
            grouped = eqn.params.get("axis_index_groups") is not None
            if COLLECTIVES[name].agrees and not grouped:
                outs = [union - axes] * len(eqn.outvars)
            else:
                outs = [union | axes] * len(eqn.outvars)
        elif name in IMPURE:
            outs = [union | impure] * len(eqn.outvars)
        elif name in _CONTROL_FLOW:
            outs = _CONTROL_FLOW[name](eqn, ins, on_value, impure)
        elif name in MAP_RULES:
            outs = MAP_RULES[name](eqn, ins, on_value, impure)
        elif name in CALL_JAXPR_PARAMS and CALL_JAXPR_PARAMS[name] in eqn.params:
            sub = _jaxpr(eqn.params[CALL_JAXPR_PARAMS[name]])
            outs = named_shapes(sub, ins, on_value, impure) if len(sub.invars) == len(ins) \
                else [union | _mentioned(sub) | (impure if _impure(sub) else Names())] * len(eqn.outvars)
        else:
            used: set = set()
            for sub in core.jaxprs_in_params(eqn.params):
                used |= _mentioned(_jaxpr(sub)) | (impure if _impure(_jaxpr(sub)) else Names())
            outs = [union | used] * len(eqn.outvars)
        for v, names in zip(eqn.outvars, outs):
            env[v] = Names(names)
            if on_value is not None:
                on_value(eqn, env[v])
    return env


def _cond(eqn, ins, on_value, impure):
    index, operands = ins[0], ins[1:]
    outs = [Names()] * len(eqn.outvars)
    for branch in eqn.params["branches"]:
        got = named_shapes(_jaxpr(branch), operands, on_value, impure)
        outs = [a | b for a, b in zip(outs, got)]
    return [o | index for o in outs]  # which branch ran depends on the index


def _fixed_point(body, consts, carry, rest, on_value, impure, n_carry):
    """Carry names of a loop body, iterated until they stop growing."""
    while True:
        got = named_shapes(body, consts + carry + rest, on_value, impure)
        new = [a | b for a, b in zip(carry, got[:n_carry])]
        if new == carry:
            return carry, got[n_carry:]
        carry = new


def _scan(eqn, ins, on_value, impure):
    p = eqn.params
    nc, ncarry = scan_counts(p)
    consts, carry, xs = ins[:nc], ins[nc:nc + ncarry], ins[nc + ncarry:]
    carry, ys = _fixed_point(_jaxpr(p["jaxpr"]), consts, carry, xs, on_value, impure, ncarry)
    return carry + ys


def _while(eqn, ins, on_value, impure):
    p = eqn.params
    cc, bc = p["cond_nconsts"], p["body_nconsts"]
    cond_consts, body_consts, carry = ins[:cc], ins[cc:cc + bc], ins[cc + bc:]
    carry, _ = _fixed_point(_jaxpr(p["body_jaxpr"]), body_consts, carry, [], on_value, impure, len(carry))
    [pred] = named_shapes(_jaxpr(p["cond_jaxpr"]), cond_consts + carry, on_value, impure)
    return [c | pred for c in carry]  # the trip count depends on the predicate


_CONTROL_FLOW = {"cond": _cond, "scan": _scan, "while": _while}


def varying_outputs(jaxpr: Jaxpr, varying_inputs: list[bool], axis_name) -> list[bool]:
    """For each output of ``jaxpr``: may it differ between devices of ``axis_name``?"""
    sets = named_shapes(jaxpr, [Names({axis_name}) if v else Names() for v in varying_inputs],
                        impure=Names({axis_name}))
    return [axis_name in s for s in sets]
