"""Transformation rules of the ``pxla_pmap`` primitive: jvp, linearize,
transpose, batching and checkpoint (partial eval); :func:`register` installs
them in jax's tables.

The body is a ClosedJaxpr, so each rule transforms it with jax's own
jaxpr-to-jaxpr functions (``ad.jvp_jaxpr``, ``ad.linearize_jaxpr``,
``ad.backward_pass``, ``batching.batch_jaxpr_axes``,
``pe.partial_eval_jaxpr_custom``) under the pmap's axis, and binds the result
as a new pmap: forward and backward programs both run through pxla_mlir's
pipeline. Residuals leave the devices mapped on axis 0 (as 2022 did).
Transformed bodies are memoized by body identity, so a repeated
``jax.grad(... pmap ...)`` call reuses them (and their compiled programs).
"""

from __future__ import annotations

from jax.dtypes import float0
from jax.lax import psum

from ..jax_internals import ad, api_util, batching, core, pe
from ..jax_internals import source_info_util as jax_source_info
from ..lru import LRU
from ..tracing import trace_flat
from .primitive import abstract_eval, bind, pxla_pmap_p

__all__ = ["register"]

_MEMO = LRU(512)


def _memo(key, build):
    """Transformed bodies by (rule, body identity, flags); the body is part of
    the key, so it stays alive as long as its entry."""
    hit = _MEMO.get(key)
    if hit is None:
        hit = _MEMO[key] = build()
    return hit


class _Ident:
    """Hashes and compares by identity (jaxprs)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __hash__(self):
        return id(self.obj)

    def __eq__(self, other):
        return isinstance(other, _Ident) and other.obj is self.obj


def _axis_env(p):
    return core.extend_axis_env_nd([(p["axis_name"], p["axis_size"])])


def _sel(xs, mask):
    return tuple(x for x, m in zip(xs, mask) if m)


def _split(xs, n):
    xs = list(xs)
    return xs[:n], xs[n:]


def _derived(p, jaxpr, *, name, in_axes=None, out_axes=None) -> dict:
    """The params of a pmap made from ``p`` by a rule: same axis, devices and
    options; a new body; no donation (rules' inputs are not the caller's)."""
    in_axes = p["in_axes"] if in_axes is None else tuple(in_axes)
    out_axes = p["out_axes"] if out_axes is None else tuple(out_axes)
    return dict(p, jaxpr=jaxpr, name=name, in_axes=in_axes, out_axes=out_axes, donated=(False,) * len(in_axes))


def _rebind(p, jaxpr, args, *, name, **axes):
    params = _derived(p, jaxpr, name=name, **axes)
    return bind(params.pop("jaxpr"), args, **params)


def _out_avals(p):
    return abstract_eval(jaxpr=p["jaxpr"], axis_name=p["axis_name"], axis_size=p["axis_size"],
                          in_axes=p["in_axes"], out_axes=p["out_axes"])[0]


# -- forward mode ---------------------------------------------------------------------

def _jvp(primals, tangents, **p):
    nz = tuple(type(t) is not ad.Zero for t in tangents)

    def build():
        with _axis_env(p):
            return ad.jvp_jaxpr(p["jaxpr"], nz, instantiate=False)

    jvp_jaxpr, nz_out = _memo(("jvp", _Ident(p["jaxpr"]), nz), build)
    outs = _rebind(p, jvp_jaxpr, (*primals, *_sel(tangents, nz)), name=f"jvp({p['name']})",
                   in_axes=(*p["in_axes"], *_sel(p["in_axes"], nz)),
                   out_axes=(*p["out_axes"], *_sel(p["out_axes"], nz_out)))
    primal_out, tangent_out = _split(outs, len(p["out_axes"]))
    it = iter(tangent_out)
    return primal_out, [next(it) if n else ad.Zero(a.to_tangent_aval()) for n, a in zip(nz_out, _out_avals(p))]


# -- reverse mode: linearize + transpose ----------------------------------------------------

def _linearize(is_vjp, nzs, *primals, **p):
    nzs = tuple(nzs)

    def build():
        with _axis_env(p):
            return ad.linearize_jaxpr(p["jaxpr"], nzs, is_vjp=is_vjp, allow_fwds=False)

    primal_jaxpr, n_res, nzs_out, _, tangent_jaxpr = _memo(("lin", _Ident(p["jaxpr"]), nzs, is_vjp), build)
    n_out = len(p["out_axes"])
    outs = _rebind(p, primal_jaxpr, primals, name=f"lin_fwd({p['name']})",
                   out_axes=(*p["out_axes"], *(0,) * n_res))
    primal_out, residuals = _split(outs, n_out)
    tangent_avals = [a.to_tangent_aval() for a in _out_avals(p)]

    def tangent_fun(residuals, *tangents):
        t_out = _rebind(p, tangent_jaxpr, (*residuals, *_sel(tangents, nzs)), name=f"lin({p['name']})",
                        in_axes=(*(0,) * n_res, *_sel(p["in_axes"], nzs)), out_axes=_sel(p["out_axes"], nzs_out))
        it = iter(t_out)
        return [next(it) if n else ad.Zero(a) for n, a in zip(nzs_out, tangent_avals)]

    return primal_out, nzs_out, residuals, tangent_fun


def _transpose(cts, *args, **p):
    jaxpr, in_axes, out_axes, size = p["jaxpr"], p["in_axes"], p["out_axes"], p["axis_size"]
    # A replicated output's cotangent reaches every device; the body's psum
    # transposes to psum, which would count it axis_size times.
    cts = [c if a is not None or type(c) is ad.Zero else c / size for c, a in zip(cts, out_axes)]
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
            # A broadcast input's cotangent is the sum over devices: one
            # all-reduce here, not a gather of per-device pieces afterwards.
            outs = [ad.instantiate_zeros(o) for o, lin in zip(outs, linear) if lin]
            return [psum(o, p["axis_name"]) if a is None and o.dtype != float0 else o
                    for o, a in zip(outs, _sel(in_axes, linear))]

        avals = [*(a for a, lin in zip(jaxpr.in_avals, linear) if not lin),
                 *(a.to_tangent_aval() for a, n in zip(jaxpr.out_avals, ct_nz) if n)]
        debug = api_util.debug_info(f"transpose({p['name']})", lambda *a: a, tuple(range(len(avals))), {})
        return trace_flat(body, avals, [(p["axis_name"], size)], debug)

    transposed = _memo(("transpose", _Ident(jaxpr), linear, ct_nz), build)
    outs = _rebind(p, transposed, (*residuals, *_sel(cts, ct_nz)), name=f"transpose({p['name']})",
                   in_axes=(*(a for a, lin in zip(in_axes, linear) if not lin), *_sel(out_axes, ct_nz)),
                   out_axes=tuple(a for a, lin in zip(in_axes, linear) if lin))
    it = iter(outs)
    return [next(it) if lin else None for lin in linear]


# -- vmap -------------------------------------------------------------------------------------

def _batcher(axis_data, vals, dims, **p):
    """vmap(pmap f) = pmap(vmap f), with the axes shifted around each other."""
    shard_dims, new_in = [], []
    for d, a in zip(dims, p["in_axes"]):
        if d is None:
            shard_dims.append(None)
            new_in.append(a)
        elif a is None:
            shard_dims.append(d)
            new_in.append(None)
        else:
            shard_dims.append(d - (a < d))
            new_in.append(a + (d <= a))
    with _axis_env(p):
        # zero_if_mapped: unbatched outputs stay unbatched (jacfwd needs it).
        batched, out_batched = batching.batch_jaxpr_axes(p["jaxpr"], axis_data, shard_dims,
                                                         [batching.zero_if_mapped] * len(p["out_axes"]))
    outs = _rebind(p, batched, vals, name=f"vmap({p['name']})", in_axes=tuple(new_in),
                   out_axes=tuple(a + 1 if (b and a is not None) else a for a, b in zip(p["out_axes"], out_batched)))
    return outs, [0 if b else None for b in out_batched]


# -- partial eval: known inputs run now, the rest is staged ---------------------------------------

def _partial_eval(trace, *tracers, **p):
    """Split into a pmap of the known part (run now; residuals leave mapped
    on axis 0) and a staged pmap of the unknown part. Needed wherever jax
    unzips a jaxpr holding a pmap with mixed inputs, e.g. transposing a
    rematerialized body: without it the whole pmap would count as linear."""
    unknowns = tuple(not t.pval.is_known() for t in tracers)

    def build():
        with _axis_env(p):
            return pe.partial_eval_jaxpr_nounits(p["jaxpr"], unknowns, instantiate=False)

    known, unknown, out_unknowns, res_avals = _memo(("pe", _Ident(p["jaxpr"]), unknowns), build)
    part = pe.partition_list
    n_res = len(res_avals)
    known_in, unknown_in = part(unknowns, p["in_axes"])
    known_out, unknown_out = part(out_unknowns, p["out_axes"])
    outs = _rebind(p, known, [t.pval.get_known() for t, u in zip(tracers, unknowns) if not u],
                   name=f"known({p['name']})", in_axes=tuple(known_in), out_axes=(*known_out, *(0,) * n_res))
    known_vals, residuals = _split(outs, len(known_out))
    staged_in = [*map(trace.new_instantiated_const, residuals),
                 *(t for t, u in zip(tracers, unknowns) if u)]
    p_staged = _derived(p, unknown, name=f"staged({p['name']})", in_axes=(*(0,) * n_res, *unknown_in),
                        out_axes=unknown_out)
    out_avals, effects = abstract_eval(**p_staged)
    staged_out = [pe.JaxprTracer(trace, pe.PartialVal.unknown(a), None) for a in out_avals]
    eqn = pe.new_eqn_recipe(trace, staged_in, staged_out, pxla_pmap_p, p_staged, effects,
                            jax_source_info.current())
    for t in staged_out:
        t.recipe = eqn
    return pe.merge_lists(out_unknowns, known_vals, staged_out)


# -- jax.checkpoint (partial eval with a saveable policy) -----------------------------------------

def _partial_eval_custom(saveable, unks_in, inst_in, eqn):
    p = eqn.params
    with _axis_env(p):
        known, staged, unks_out, inst_out, n_res = pe.partial_eval_jaxpr_custom(
            p["jaxpr"].jaxpr, unks_in, inst_in, False, False, saveable)
    part = pe.partition_list
    ins_known, _ = part(unks_in, eqn.invars)
    _, ins_staged = part(inst_in, eqn.invars)
    outs_known, _ = part(unks_out, eqn.outvars)
    _, outs_staged = part(inst_out, eqn.outvars)
    p_known = _derived(p, core.ClosedJaxpr(known, ()), name=f"known({p['name']})",
                       in_axes=part(unks_in, p["in_axes"])[0],
                       out_axes=(*part(unks_out, p["out_axes"])[0], *(0,) * n_res))
    p_staged = _derived(p, core.ClosedJaxpr(staged, ()), name=f"staged({p['name']})",
                        in_axes=(*(0,) * n_res, *part(inst_in, p["in_axes"])[1]),
                        out_axes=part(inst_out, p["out_axes"])[1])
    new_var = core.gensym()
    res = [new_var(core.unmapped_aval(p["axis_size"], 0, v.aval)) for v in staged.invars[:n_res]]
    eqn_known = pe.new_jaxpr_eqn(ins_known, [*outs_known, *res], pxla_pmap_p, p_known,
                                 abstract_eval(**p_known)[1], eqn.source_info, eqn.ctx)
    eqn_staged = pe.new_jaxpr_eqn([*res, *ins_staged], outs_staged, pxla_pmap_p, p_staged,
                                  abstract_eval(**p_staged)[1], eqn.source_info, eqn.ctx)
    new_inst = [x for x, i in zip(eqn.invars, inst_in) if type(x) is core.Var and not i]
    return eqn_known, eqn_staged, unks_out, inst_out, new_inst + res


# -- dead-code elimination (jax.checkpoint's policies rely on it) ---------------------------------

def _dce(used_outputs, eqn):
    """Drop unused outputs, then what the body no longer needs: without it a
    rematerialized pmap would recompute (and keep) everything its policy
    saved or did not need."""
    p = eqn.params
    if not any(used_outputs) and not pe.has_effects(eqn):
        return [False] * len(eqn.invars), None
    with _axis_env(p):
        body, used_inputs = pe.dce_jaxpr(p["jaxpr"].jaxpr, used_outputs)
    params = _derived(p, core.ClosedJaxpr(body, ()), name=p["name"], in_axes=_sel(p["in_axes"], used_inputs),
                      out_axes=_sel(p["out_axes"], used_outputs))
    params["donated"] = _sel(p["donated"], used_inputs)
    new_eqn = pe.new_jaxpr_eqn(_sel(eqn.invars, used_inputs), _sel(eqn.outvars, used_outputs), pxla_pmap_p,
                               params, abstract_eval(**params)[1], eqn.source_info, eqn.ctx)
    return used_inputs, new_eqn


def register() -> None:
    ad.primitive_jvps[pxla_pmap_p] = _jvp
    ad.primitive_linearizations[pxla_pmap_p] = _linearize
    ad.primitive_transposes[pxla_pmap_p] = _transpose
    batching.fancy_primitive_batchers[pxla_pmap_p] = _batcher
    pe.custom_partial_eval_rules[pxla_pmap_p] = _partial_eval
    pe.partial_eval_jaxpr_custom_rules[pxla_pmap_p] = _partial_eval_custom
    pe.dce_rules[pxla_pmap_p] = _dce
