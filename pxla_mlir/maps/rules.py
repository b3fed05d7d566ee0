"""Transformation rules of the map primitives: jvp, linearize, transpose,
batching, checkpoint (partial eval) and the expansion of jax's high-level
primitives, written once for every map.

A map primitive carries its body as a ClosedJaxpr, so each rule transforms
the body with jax's own jaxpr-to-jaxpr functions (``ad.jvp_jaxpr``,
``ad.linearize_jaxpr``, ``ad.backward_pass``, ``batching.batch_jaxpr_axes``,
``pe.partial_eval_jaxpr_custom``) under the map's axis environment, and binds
the result as a new map: forward and backward programs both run through
pxla_mlir's pipeline. What differs between maps is how they say which
dimensions are mapped (a "spec" per operand and result: pmap's int or None,
xmap's ``{dim: name}``); a kind's :class:`MapRules` answer those questions.
Transformed bodies are memoized by body identity, so a repeated
``jax.grad(... map ...)`` call reuses them (and their compiled programs).
"""

from __future__ import annotations

import contextlib
import functools
from typing import TYPE_CHECKING, Any

from pxla_mlir.jaxbridge.jax_internals import ad, api_util, batching, core, pe, source_info_util as jax_source_info
from pxla_mlir.jaxbridge.jaxpr_protocols import linearize_jaxpr, register_dce, register_linearization
from pxla_mlir.jaxbridge.stablehlo_lowering import low_level
from pxla_mlir.maps.tracing import trace_flat
from pxla_mlir.mlir.support.lru import LRU

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr

__all__ = ["MapRules", "register"]

_MEMO = LRU(512)


def memo(key, build):
    """Transformed bodies by (rule, body identity, flags); the body is part of
    the key, so it stays alive as long as its entry."""
    hit = _MEMO.get(key)
    if hit is None:
        hit = _MEMO[key] = build()
    return hit


class Ident:
    """Hashes and compares by identity (jaxprs)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, Ident) and other.obj is self.obj


class MapRules:
    """How one map primitive names its mapped dimensions. Params always hold
    ``jaxpr``, ``name``, ``in_axes``/``out_axes`` (one spec per operand and
    result) and ``donated``."""

    primitive: Any
    name: str
    #: The spec of an operand every element of the map sees whole (pmap: None; xmap: no named dims).
    broadcast_spec: Any = None

    def bind(self, jaxpr: ClosedJaxpr, args, params: dict) -> list:
        raise NotImplementedError

    def abstract_eval(self, params: dict):
        """(global out avals, effects) of a map with ``params``."""
        raise NotImplementedError

    def env(self, p) -> list:
        """The axis environment the body is traced under: (name, size) pairs."""
        raise NotImplementedError

    def mesh_context(self, p):
        """What else the body is traced (and transformed) under: a partitioned
        pmap's mesh; nothing for other maps."""
        return contextlib.nullcontext()

    def residual_specs(self, p, jaxpr, in_specs, n_res: int) -> tuple:
        """Specs of the last ``n_res`` outputs of ``jaxpr`` (a body taking
        operands mapped by ``in_specs``): how residuals leave the devices."""
        raise NotImplementedError

    def global_aval(self, p, spec, aval):
        """The global aval of a body value ``aval`` mapped by ``spec``."""
        raise NotImplementedError

    def copies(self, p, out_spec) -> int | None:
        """How many body elements share one value of an output (the elements
        along every axis ``out_spec`` does not map); None if it is mapped
        along every axis."""
        raise NotImplementedError

    def sum_cotangent(self, p, ct, in_spec):
        """Inside a transposed body: the cotangent of an operand mapped by
        ``in_spec``, summed over the axes it is broadcast along."""
        raise NotImplementedError

    def batch_operand(self, p, spec, dim: int) -> tuple:
        """An operand batched (by vmap) at global dimension ``dim``: its
        batch dimension inside the body, and its new spec."""
        raise NotImplementedError

    def batch_result(self, p, spec):
        """The spec of a result whose body value is batched at dimension 0
        (the vmap dimension leaves at global dimension 0)."""
        raise NotImplementedError

    def per_element_spec(self, p):
        """The spec of a result with one value per element of the map: leading
        dimensions over every mapped axis (checkify's errors, one per mapped index)."""
        raise NotImplementedError


def _sel(xs, mask):
    return tuple(x for x, m in zip(xs, mask) if m)


def _split(xs, n):
    xs = list(xs)
    return xs[:n], xs[n:]


def _derived(p, jaxpr, *, name, in_axes=None, out_axes=None) -> dict:
    """The params of a map made from ``p`` by a rule: same axes, devices and
    options; a new body; no donation (rules' inputs are not the caller's)."""
    in_axes = p["in_axes"] if in_axes is None else tuple(in_axes)
    out_axes = p["out_axes"] if out_axes is None else tuple(out_axes)
    return dict(p, jaxpr=jaxpr, name=name, in_axes=in_axes, out_axes=out_axes, donated=(False,) * len(in_axes))


def _rebind(kind: MapRules, p, jaxpr, args, *, name, **axes):
    params = _derived(p, jaxpr, name=name, **axes)
    return kind.bind(params.pop("jaxpr"), args, params)


@contextlib.contextmanager
def _axis_env(kind: MapRules, p):
    with kind.mesh_context(p), core.extend_axis_env_nd(kind.env(p)):
        yield


# -- forward mode ---------------------------------------------------------------------

def jvp(kind: MapRules, primals, tangents, **p):
    nz = tuple(type(t) is not ad.Zero for t in tangents)

    def build():
        with _axis_env(kind, p):
            return ad.jvp_jaxpr(p["jaxpr"], nz, instantiate=False)

    jvp_jaxpr, nz_out = memo(("jvp", kind.name, Ident(p["jaxpr"]), nz), build)
    outs = _rebind(kind, p, jvp_jaxpr, (*primals, *_sel(tangents, nz)), name=f"jvp({p['name']})",
                   in_axes=(*p["in_axes"], *_sel(p["in_axes"], nz)),
                   out_axes=(*p["out_axes"], *_sel(p["out_axes"], nz_out)))
    primal_out, tangent_out = _split(outs, len(p["out_axes"]))
    it = iter(tangent_out)
    out_avals = kind.abstract_eval(p)[0]
    return primal_out, [next(it) if n else ad.Zero(a.to_tangent_aval()) for n, a in zip(nz_out, out_avals)]


# -- reverse mode: linearize + transpose ----------------------------------------------------

def linearize(kind: MapRules, is_vjp, nzs, *primals, **p):
    nzs = tuple(nzs)

    def build():
        with _axis_env(kind, p):
            primal, n_res, nzs_out, tangent = linearize_jaxpr(p["jaxpr"], nzs, is_vjp=is_vjp)
        return primal, nzs_out, tangent, kind.residual_specs(p, primal, p["in_axes"], n_res)

    primal_jaxpr, nzs_out, tangent_jaxpr, res_specs = memo(("lin", kind.name, Ident(p["jaxpr"]), nzs, is_vjp),
                                                           build)
    n_out = len(p["out_axes"])
    outs = _rebind(kind, p, primal_jaxpr, primals, name=f"lin_fwd({p['name']})",
                   out_axes=(*p["out_axes"], *res_specs))
    primal_out, residuals = _split(outs, n_out)
    tangent_avals = [a.to_tangent_aval() for a in kind.abstract_eval(p)[0]]

    def tangent_fun(residuals, *tangents):
        t_out = _rebind(kind, p, tangent_jaxpr, (*residuals, *_sel(tangents, nzs)), name=f"lin({p['name']})",
                        in_axes=(*res_specs, *_sel(p["in_axes"], nzs)), out_axes=_sel(p["out_axes"], nzs_out))
        it = iter(t_out)
        return [next(it) if n else ad.Zero(a) for n, a in zip(nzs_out, tangent_avals)]

    return primal_out, nzs_out, residuals, tangent_fun


def transpose(kind: MapRules, cts, *args, **p):
    jaxpr, in_axes, out_axes = p["jaxpr"], p["in_axes"], p["out_axes"]
    # An output not mapped along some axis reaches every element along it;
    # the body's psum transposes to psum, which would count it that often.
    divisors = [kind.copies(p, a) for a in out_axes]
    cts = [c if n is None or type(c) is ad.Zero else c / n for c, n in zip(cts, divisors)]
    linear = tuple(ad.is_undefined_primal(x) for x in args)
    ct_nz = tuple(type(c) is not ad.Zero for c in cts)
    residuals = [x for x, lin in zip(args, linear) if not lin]

    def build():
        def body(*xs):
            res, ct = _split(xs, len(residuals))
            r, c = iter(res), iter(ct)
            primals = [ad.UndefinedPrimal(a) if lin else next(r) for a, lin in zip(jaxpr.in_avals, linear)]
            cts_full = [next(c) if n else ad.Zero(a.to_tangent_aval()) for a, n in zip(jaxpr.out_avals, ct_nz)]
            outs = ad.backward_pass(jaxpr.jaxpr, False, jaxpr.consts, primals, cts_full)
            # A broadcast operand's cotangent is the sum over its elements: one
            # all-reduce here, not a gather of per-element pieces afterwards.
            outs = [ad.instantiate_zeros(o) for o, lin in zip(outs, linear) if lin]
            return [kind.sum_cotangent(p, o, a) for o, a in zip(outs, _sel(in_axes, linear))]

        avals = [*(a for a, lin in zip(jaxpr.in_avals, linear) if not lin),
                 *(a.to_tangent_aval() for a, n in zip(jaxpr.out_avals, ct_nz) if n)]
        debug = api_util.debug_info(f"transpose({p['name']})", lambda *a: a, tuple(range(len(avals))), {})
        with kind.mesh_context(p):
            return trace_flat(body, avals, kind.env(p), debug, binder=kind.name)

    transposed = memo(("transpose", kind.name, Ident(jaxpr), linear, ct_nz), build)
    outs = _rebind(kind, p, transposed, (*residuals, *_sel(cts, ct_nz)), name=f"transpose({p['name']})",
                   in_axes=(*(a for a, lin in zip(in_axes, linear) if not lin), *_sel(out_axes, ct_nz)),
                   out_axes=tuple(a for a, lin in zip(in_axes, linear) if lin))
    it = iter(outs)
    return [next(it) if lin else None for lin in linear]


# -- vmap -------------------------------------------------------------------------------------

def batcher(kind: MapRules, axis_data, vals, dims, **p):
    """vmap(map f) = map(vmap f), with the axes shifted around each other."""
    body_dims, new_in = [], []
    for d, spec in zip(dims, p["in_axes"]):
        if d is None:
            body_dims.append(None)
            new_in.append(spec)
        else:
            body_dim, new_spec = kind.batch_operand(p, spec, d)
            body_dims.append(body_dim)
            new_in.append(new_spec)
    with _axis_env(kind, p):
        # zero_if_mapped: unbatched outputs stay unbatched (jacfwd needs it).
        batched, out_batched = batching.batch_jaxpr_axes(p["jaxpr"], axis_data, body_dims,
                                                         [batching.zero_if_mapped] * len(p["out_axes"]))
    outs = _rebind(kind, p, batched, vals, name=f"vmap({p['name']})", in_axes=tuple(new_in),
                   out_axes=tuple(kind.batch_result(p, a) if b else a for a, b in zip(p["out_axes"], out_batched)))
    return outs, [0 if b else None for b in out_batched]


# -- partial eval: known inputs run now, the rest is staged ---------------------------------------

def partial_eval(kind: MapRules, trace, *tracers, **p):
    """Split into a map of the known part (run now; residuals leave as
    ``residual_specs`` say) and a staged map of the unknown part. Needed
    wherever jax unzips a jaxpr holding a map with mixed inputs, e.g.
    transposing a rematerialized body: without it the whole map would count
    as linear."""
    unknowns = tuple(not t.pval.is_known() for t in tracers)
    part = pe.partition_list
    known_in, unknown_in = part(unknowns, p["in_axes"])

    def build():
        with _axis_env(kind, p):
            known, unknown, out_unknowns, res_avals = pe.partial_eval_jaxpr_nounits(p["jaxpr"], unknowns,
                                                                                   instantiate=False)
        return known, unknown, out_unknowns, kind.residual_specs(p, known, known_in, len(res_avals))

    known, unknown, out_unknowns, res_specs = memo(("pe", kind.name, Ident(p["jaxpr"]), unknowns), build)
    known_out, unknown_out = part(out_unknowns, p["out_axes"])
    outs = _rebind(kind, p, known, [t.pval.get_known() for t, u in zip(tracers, unknowns) if not u],
                   name=f"known({p['name']})", in_axes=tuple(known_in), out_axes=(*known_out, *res_specs))
    known_vals, residuals = _split(outs, len(known_out))
    staged_in = [*map(trace.new_instantiated_const, residuals),
                 *(t for t, u in zip(tracers, unknowns) if u)]
    p_staged = _derived(p, unknown, name=f"staged({p['name']})", in_axes=(*res_specs, *unknown_in),
                        out_axes=unknown_out)
    out_avals, effects = kind.abstract_eval(p_staged)
    staged_out = [pe.JaxprTracer(trace, pe.PartialVal.unknown(a), None) for a in out_avals]
    eqn = pe.new_eqn_recipe(trace, staged_in, staged_out, kind.primitive, p_staged, effects,
                            jax_source_info.current())
    for t in staged_out:
        t.recipe = eqn
    return pe.merge_lists(out_unknowns, known_vals, staged_out)


# -- jax.checkpoint (partial eval with a saveable policy) -----------------------------------------

def partial_eval_custom(kind: MapRules, saveable, unks_in, inst_in, eqn):
    p = eqn.params
    with _axis_env(kind, p):
        known, staged, unks_out, inst_out, n_res = pe.partial_eval_jaxpr_custom(
            p["jaxpr"].jaxpr, unks_in, inst_in, False, False, saveable)
    part = pe.partition_list
    ins_known, _ = part(unks_in, eqn.invars)
    _, ins_staged = part(inst_in, eqn.invars)
    outs_known, _ = part(unks_out, eqn.outvars)
    _, outs_staged = part(inst_out, eqn.outvars)
    known_in = part(unks_in, p["in_axes"])[0]
    res_specs = kind.residual_specs(p, known, known_in, n_res)
    p_known = _derived(p, core.ClosedJaxpr(known, ()), name=f"known({p['name']})", in_axes=known_in,
                       out_axes=(*part(unks_out, p["out_axes"])[0], *res_specs))
    p_staged = _derived(p, core.ClosedJaxpr(staged, ()), name=f"staged({p['name']})",
                        in_axes=(*res_specs, *part(inst_in, p["in_axes"])[1]),
                        out_axes=part(inst_out, p["out_axes"])[1])
    new_var = core.gensym()
    res = [new_var(kind.global_aval(p, s, v.aval)) for s, v in zip(res_specs, staged.invars[:n_res])]
    eqn_known = pe.new_jaxpr_eqn(ins_known, [*outs_known, *res], kind.primitive, p_known,
                                 kind.abstract_eval(p_known)[1], eqn.source_info, eqn.ctx)
    eqn_staged = pe.new_jaxpr_eqn([*res, *ins_staged], outs_staged, kind.primitive, p_staged,
                                  kind.abstract_eval(p_staged)[1], eqn.source_info, eqn.ctx)
    new_inst = [x for x, i in zip(eqn.invars, inst_in) if type(x) is core.Var and not i]
    return eqn_known, eqn_staged, unks_out, inst_out, new_inst + res


# -- dead-code elimination (jax.checkpoint's policies rely on it) ---------------------------------

def dce(kind: MapRules, used_outputs, eqn):
    """Drop unused outputs, then what the body no longer needs: without it a
    rematerialized map would recompute (and keep) everything its policy
    saved or did not need."""
    p = eqn.params
    if not any(used_outputs) and not pe.has_effects(eqn):
        return [False] * len(eqn.invars), None
    with _axis_env(kind, p):
        body, used_inputs = pe.dce_jaxpr(p["jaxpr"].jaxpr, used_outputs)
    params = _derived(p, core.ClosedJaxpr(body, ()), name=p["name"], in_axes=_sel(p["in_axes"], used_inputs),
                      out_axes=_sel(p["out_axes"], used_outputs))
    params["donated"] = _sel(p["donated"], used_inputs)
    new_eqn = pe.new_jaxpr_eqn(_sel(eqn.invars, used_inputs), _sel(eqn.outvars, used_outputs), kind.primitive,
                               params, kind.abstract_eval(params)[1], eqn.source_info, eqn.ctx)
    return used_inputs, new_eqn


# -- jax's high-level primitives: expanded before lowering ----------------------------------------

def to_lojax(kind: MapRules, *args, **p):
    """The map with its body's high-level primitives expanded (``call_hi_primitive``, ...), as jax expands a
    jit's: the lowering enclosing a nested map (an outer map's, or jax.jit's) expands every equation whose
    primitive ``is_high``, and a map's is when its body is (jax's default ``is_high`` reads the body)."""
    with _axis_env(kind, p):
        body = low_level(p["jaxpr"], p["name"])  # jax caches it by body
    params = dict(p)
    del params["jaxpr"]
    return kind.bind(body, args, params)


def register(kind: MapRules) -> None:
    """Installs every rule for ``kind.primitive`` in jax's tables."""
    prim = kind.primitive
    ad.primitive_jvps[prim] = functools.partial(jvp, kind)
    register_linearization(prim, functools.partial(linearize, kind))
    ad.primitive_transposes[prim] = functools.partial(transpose, kind)
    batching.fancy_primitive_batchers[prim] = functools.partial(batcher, kind)
    pe.custom_partial_eval_rules[prim] = functools.partial(partial_eval, kind)
    pe.partial_eval_jaxpr_custom_rules[prim] = functools.partial(partial_eval_custom, kind)
    register_dce(prim, functools.partial(dce, kind))
    prim.to_lojax = functools.partial(to_lojax, kind)
