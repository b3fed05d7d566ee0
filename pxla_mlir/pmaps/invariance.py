"""Which outputs of a pmap body are provably the same on every device.

``out_axes=None`` returns one value for all devices. 2022 pmap silently
returned device 0's value even when devices disagreed (jax issue #21671);
pxla_mlir instead only accepts ``out_axes=None`` for outputs this analysis
proves invariant, and raises otherwise.

A value *varies* over the pmap axis if it is computed from a mapped input,
from ``axis_index`` of the axis, or from a collective that mixes devices
without making them agree (ppermute, all_to_all, reduce_scatter, or any
collective restricted to ``axis_index_groups``). ``psum``/``pmax``/``pmin``
and ``all_gather`` over the axis make a value invariant. Calls (jit, custom
derivatives, checkpoint) are analysed inside; other higher-order primitives
(control flow, nested pmaps) are conservative: their outputs vary if any
input varies or their body uses the axis.
"""

from __future__ import annotations

from ..jax_internals import core

_REDUCING = {"psum", "pmax", "pmin", "all_gather"}
_CALL_JAXPR_PARAMS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
                      "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "remat": "jaxpr",
                      "checkpoint": "jaxpr"}


def _axes_of(eqn) -> tuple:
    params = eqn.params
    for key in ("axes", "axis_name"):
        if key in params:
            names = params[key]
            return tuple(names) if isinstance(names, (tuple, list)) else (names,)
    return ()


def _mentions_axis(jaxpr, axis_name) -> bool:
    for eqn in jaxpr.eqns:
        if axis_name in _axes_of(eqn):
            return True
        if any(_mentions_axis(sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub, axis_name)
               for sub in core.jaxprs_in_params(eqn.params)):
            return True
    return False


def varying_outputs(jaxpr: core.Jaxpr, varying_inputs: list[bool], axis_name) -> list[bool]:
    """For each output of ``jaxpr``: may it differ between devices of ``axis_name``?"""
    varying: set = {v for v, is_varying in zip(jaxpr.invars, varying_inputs) if is_varying}

    def is_varying(atom) -> bool:
        return not isinstance(atom, core.Literal) and atom in varying

    for eqn in jaxpr.eqns:
        inputs = [is_varying(v) for v in eqn.invars]
        name = eqn.primitive.name
        axes = _axes_of(eqn)
        if axis_name in axes:
            grouped = eqn.params.get("axis_index_groups") is not None
            outs = [not (name in _REDUCING and not grouped)] * len(eqn.outvars)
        elif name in _CALL_JAXPR_PARAMS and _CALL_JAXPR_PARAMS[name] in eqn.params:
            sub = eqn.params[_CALL_JAXPR_PARAMS[name]]
            sub = sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub
            outs = varying_outputs(sub, inputs, axis_name) if len(sub.invars) == len(inputs) \
                else [any(inputs) or _mentions_axis(sub, axis_name)] * len(eqn.outvars)
        else:
            subs = core.jaxprs_in_params(eqn.params)
            uses_axis = any(_mentions_axis(s.jaxpr if isinstance(s, core.ClosedJaxpr) else s, axis_name)
                            for s in subs)
            outs = [any(inputs) or uses_axis] * len(eqn.outvars)
        for v, out_varies in zip(eqn.outvars, outs):
            if out_varies:
                varying.add(v)
    return [is_varying(v) for v in jaxpr.outvars]
