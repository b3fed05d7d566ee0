"""jax's protocols for primitives and jaxprs where releases differ, bridged:
registering a primitive's linearization, dead-code and checkify rules,
reading a ``scan``'s operands, linearizing a jaxpr, expanding jax's
high-level primitives, and lowering a jaxpr to a module. Each bridge says
which releases take which branch.

Built on the private names of :mod:`.jax_internals`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable

from pxla_mlir.jaxbridge.jax_internals import JAX_VERSION, ad, checkify, config, jax_mlir, pe

__all__ = ["checkify_jaxpr", "has_checks", "high_level_avals", "linearize_jaxpr", "lojax", "lower_jaxpr_to_module",
           "lowering_flags", "register_checkify", "register_dce", "register_linearization", "scan_counts"]

#: jax 0.11+ asks for the output types too.
_LOWER_TAKES_OUT_AVALS = "out_avals" in inspect.signature(jax_mlir.lower_jaxpr_to_module).parameters


@contextlib.contextmanager
def lowering_flags(shardy: bool):
    """jax's flags as our lowerings need them: Shardy on or off, and
    collectives with explicit device groups (under Shardy, jax 0.11+ writes
    groups as mesh axes, ``#stablehlo.replica_group_mesh_axes``, which the
    pxla passes do not read)."""
    with config.use_shardy_partitioner(shardy):
        if config.use_rgv3 is None:  # jax 0.10
            yield
            return
        with config.use_rgv3(False):
            yield


def lower_jaxpr_to_module(name: str, closed_jaxpr, **kwargs):
    """jax's ``mlir.lower_jaxpr_to_module`` (0.11+ also takes ``out_avals``)."""
    if _LOWER_TAKES_OUT_AVALS:
        kwargs.setdefault("out_avals", closed_jaxpr.out_avals)
    return jax_mlir.lower_jaxpr_to_module(name, closed_jaxpr, **kwargs)


def register_linearization(primitive, rule: Callable) -> None:
    """Registers ``rule(is_vjp, nonzeros, *primals, **params) -> (primal outputs,
    nonzero tangent outputs, residuals, tangent_fun(residuals, *tangents))``
    as ``primitive``'s linearization (jax 0.11+ also passes structured
    residuals, which our rules never make)."""
    if JAX_VERSION < (0, 11):
        ad.primitive_linearizations[primitive] = rule
        return

    def with_structured_residuals(is_vjp, nonzeros, *primals, **params):
        out, nzs_out, residuals, tangent_fun = rule(is_vjp, nonzeros, *primals, **params)
        return out, nzs_out, residuals, None, lambda res, _structured, *tangents: tangent_fun(res, *tangents)

    ad.primitive_linearizations[primitive] = with_structured_residuals


def register_dce(primitive, rule: Callable) -> None:
    """Registers ``rule(used_outputs, eqn) -> (used_inputs, new eqn or None)``
    as ``primitive``'s dead-code rule (jax 0.12 also passes which inputs are
    live, which matters only for references, which maps never take)."""
    if not _DCE_RULES_TAKE_LIVE_INPUTS:
        pe.dce_rules[primitive] = rule
    else:
        pe.dce_rules[primitive] = lambda used_outputs, _live_inputs, eqn: rule(used_outputs, eqn)


#: jax's own closed-call rule shows which protocol the release's dead-code rules follow.
_DCE_RULES_TAKE_LIVE_INPUTS = len(inspect.signature(pe.dce_jaxpr_closed_call_rule).parameters) == 3


def scan_counts(params: dict) -> tuple[int, int]:
    """(constants, carried values) among a ``scan`` equation's operands
    (jax 0.11+ keeps them as a tree of the operands, ``ft_in``)."""
    if "num_consts" in params:  # jax 0.10
        return params["num_consts"], params["num_carry"]
    consts, carry, _ = params["ft_in"].unpack()
    return len(consts), len(carry)


def linearize_jaxpr(jaxpr, nonzeros, *, is_vjp: bool):
    """jax's ``ad.linearize_jaxpr`` without forwarding: (forward jaxpr giving
    the primal outputs then the residuals, number of residuals, which tangent
    outputs are nonzero, tangent jaxpr taking the residuals then the nonzero
    tangents)."""
    fwd, res, nzs_out, _, tangent = ad.linearize_jaxpr(jaxpr, nonzeros, is_vjp=is_vjp, allow_fwds=False)
    if isinstance(res, int):  # jax 0.10: the number of residuals
        return fwd, res, nzs_out, tangent
    # jax 0.11+: the forward outputs' types as a tree (primals, residuals, structured residuals); the tangent
    # jaxpr takes the structured ones last, after the tangents: move them next to the other residuals.
    _, plain, structured = res.unpack()
    n_res = len(plain) + len(structured)
    if len(structured):
        n_tangents = len(tangent.invars) - n_res
        to_move = [True] * len(plain) + [False] * n_tangents + [True] * len(structured)
        tangent = pe.move_binders_to_front(tangent, to_move)
    return fwd, n_res, nzs_out, tangent


def lojax(closed_jaxpr):
    """``closed_jaxpr`` with jax's high-level primitives expanded to the ones
    jax has MLIR rules for, as jax expands a jit's jaxpr before lowering it
    (``Traced.lojax``: ``pe.lower_jaxpr``); ``closed_jaxpr`` itself when it
    has none. jax's library binds such primitives (``call_hi_primitive``:
    ``jnp.searchsorted`` from jax 0.12, ``jax.scipy.linalg.expm`` through
    it); every equation whose primitive says it ``is_high`` is rewritten by
    its ``to_lojax`` rule. Every supported release has this protocol
    (``lower_jaxpr2`` takes a ClosedJaxpr on 0.10, the merged Jaxpr on 0.11+)."""
    if not closed_jaxpr.is_high:
        return closed_jaxpr
    return pe.lower_jaxpr2(closed_jaxpr)


def high_level_avals(closed_jaxpr) -> list:
    """The operand and result types of ``closed_jaxpr`` that are jax's
    high-level types (a value jax represents by several arrays)."""
    return [a for a in (*closed_jaxpr.in_avals, *closed_jaxpr.out_avals) if getattr(a, "is_high", False)]


# -- checkify -----------------------------------------------------------------------------------

def register_checkify(primitive, rule: Callable) -> None:
    """Registers ``rule(context, error, enabled_errors, *operands, **params) ->
    (error, outputs)`` as ``primitive``'s checkify rule. ``context`` numbers
    the error codes of a checkify trace (jax 0.11+), None before; hand it to
    :func:`checkify_jaxpr`."""
    if JAX_VERSION < (0, 11):
        checkify.error_checks[primitive] = functools.partial(rule, None)
    else:
        checkify.error_checks[primitive] = rule


def checkify_jaxpr(context, jaxpr, enabled_errors, err_tree, *avals):
    """``jaxpr`` with its checks functionalized: (checked jaxpr taking the error
    leaves then ``jaxpr``'s operands, the pytree of (error, outputs)). With a
    ``context`` (jax 0.11+), jax caches the result and advances its codes."""
    if context is None:
        checked, out_tree, _ = checkify.jaxpr_to_checkify_jaxpr(jaxpr, enabled_errors, err_tree, *avals)
    else:
        checked, out_tree, _ = checkify.jaxpr_to_checkify_jaxpr(context, jaxpr, enabled_errors, err_tree, *avals)
    return checked, out_tree


def has_checks(jaxpr) -> bool:
    """Does ``jaxpr`` hold ``checkify.check``s (effects only checkify can discharge)?"""
    return any(isinstance(e, checkify.ErrorEffect) for e in jaxpr.effects)
