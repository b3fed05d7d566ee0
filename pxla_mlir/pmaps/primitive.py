"""The ``pxla_pmap`` primitive: a pmap as one equation of a jaxpr.

Binding it at the top level runs the compiled program (the impl); inside an
outer pmap's trace it is staged, and its lowering rule emits the
``@pxla.shard`` / ``@pxla.unshard`` placeholders around the inner body, so a
nested pmap becomes part of the outer pmap's module (2022 semantics: one
program over the product of the axis sizes).

Params: ``jaxpr`` (the per-shard body, a ClosedJaxpr without consts),
``axis_name``, ``axis_size``, ``in_axes``/``out_axes`` (tuples of int or
None), ``name``, and the top-level-only ``devices``, ``backend``,
``donated`` (tuple of bool) and ``options`` (a PmapOptions).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from jax.extend.core import Primitive
from jaxlib.mlir import ir

from ..jax_internals import core, jax_mlir, pe, sharding_impls_mesh, spmd_axis_context

__all__ = ["pxla_pmap_p", "PmapOptions", "bind", "REP_AXIS", "replicas_needed", "extend_mesh"]

#: Name of the anonymous trailing mesh axis: devices used by inner pmaps.
REP_AXIS = "_pxla_rep"

pxla_pmap_p = Primitive("pxla_pmap")
pxla_pmap_p.multiple_results = True


@dataclasses.dataclass(frozen=True)
class PmapOptions:
    """How a top-level pmap is lowered (pxla_mlir's own knobs)."""

    mode: str = "replica"  # "replica" | "partition"
    unshard: str = "all-gather"  # "all-gather" | "all-reduce"

    def pipeline(self) -> str:
        return f"builtin.module(pxla-pmap-pipeline{{mode={self.mode} unshard={self.unshard}}})"


def bind(closed: core.ClosedJaxpr, args, *, axis_name, axis_size: int, in_axes, out_axes, name: str,
         devices=None, backend=None, donated=None, options: PmapOptions | None = None):
    """Binds pxla_pmap_p; consts of ``closed`` become broadcast operands, so the
    lowering never sees constvars and closures over outer tracers are legal."""
    args, in_axes = list(args), tuple(in_axes)
    donated = tuple(donated) if donated is not None else (False,) * len(args)
    if closed.consts:
        with core.extend_axis_env_nd([(axis_name, axis_size)]):
            jaxpr = pe.convert_constvars_jaxpr(closed.jaxpr)
        args = list(closed.consts) + args
        in_axes = (None,) * len(closed.consts) + in_axes
        donated = (False,) * len(closed.consts) + donated
        closed = core.ClosedJaxpr(jaxpr, ())
    return pxla_pmap_p.bind(*args, jaxpr=closed, axis_name=axis_name, axis_size=axis_size, in_axes=in_axes,
                            out_axes=tuple(out_axes), name=name, devices=devices, backend=backend,
                            donated=donated, options=options or PmapOptions())


def _abstract_eval(*avals, jaxpr, axis_name, axis_size, in_axes, out_axes, **_):
    outs = [core.unmapped_aval(axis_size, a, av) if a is not None else av
            for av, a in zip(jaxpr.out_avals, out_axes)]
    # The pmap binds its own axis; outer axis names used inside stay visible.
    return outs, core.filter_named_axis_effects(jaxpr.effects, {axis_name})


pxla_pmap_p.def_effectful_abstract_eval(_abstract_eval)


def _typecheck(_ctx_factory, *in_atoms, jaxpr, axis_name, axis_size, in_axes, out_axes, **params):
    for v, x, a in zip(jaxpr.jaxpr.invars, in_atoms, in_axes):
        want = core.mapped_aval(axis_size, a, x.aval) if a is not None else x.aval
        if not core.typecompat(v.aval, want):
            raise core.JaxprTypeError(f"pxla_pmap binder {v.aval} does not match the sharded operand {want}")
    # jax would check the body without this pmap's axis bound.
    with core.extend_axis_env_nd([(axis_name, axis_size)]):
        core.check_jaxpr(jaxpr.jaxpr)
    return _abstract_eval(jaxpr=jaxpr, axis_name=axis_name, axis_size=axis_size, in_axes=in_axes,
                          out_axes=out_axes)


core.custom_typechecks[pxla_pmap_p] = _typecheck


def replicas_needed(jaxpr) -> int:
    """Devices one shard of a pmap body needs: the product of nested pmap sizes
    (the largest over sibling pmaps)."""
    if isinstance(jaxpr, core.ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    best = 1
    for eqn in jaxpr.eqns:
        if eqn.primitive is pxla_pmap_p:
            best = max(best, eqn.params["axis_size"] * replicas_needed(eqn.params["jaxpr"]))
        else:
            for sub in core.jaxprs_in_params(eqn.params):
                best = max(best, replicas_needed(sub))
    return best


def extend_mesh(names: tuple, sizes: tuple, axis_name, axis_size: int) -> tuple[tuple, tuple, int]:
    """The mesh of a nested pmap's body: the outer axes, this axis, then the
    devices left for deeper pmaps (the 2022 axis env). Returns (names, sizes,
    stride of the new axis)."""
    total = math.prod(sizes)
    if names and names[-1] == REP_AXIS:
        names, sizes = names[:-1], sizes[:-1]
    if axis_name in names:
        raise ValueError(f"nested pmap reuses the axis name {axis_name!r} of an enclosing pmap; give it a new name")
    names, sizes = names + (axis_name,), sizes + (axis_size,)
    trailing, ragged = divmod(total, math.prod(sizes))
    if ragged or trailing < 1:
        raise ValueError(f"nested pmap over {axis_name!r} needs {math.prod(sizes)} devices per outer shard, "
                         f"but only {total} are available")
    if trailing > 1:
        names, sizes = names + (REP_AXIS,), sizes + (trailing,)
    return names, sizes, trailing


def _i64(v: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), int(v))


def _placeholder(target: str, x, out_aval, mctx, *, axis, axis_size, axis_name, stride):
    attrs = {"pxla.axis": _i64(axis), "pxla.axis_size": _i64(axis_size), "pxla.stride": _i64(stride),
             "pxla.axis_name": ir.StringAttr.get(str(axis_name))}
    op = jax_mlir.custom_call(target, result_types=[jax_mlir.aval_to_ir_type(mctx, out_aval)], operands=[x],
                              extra_attributes=attrs)
    return op.result


class UnsupportedContext(NotImplementedError):
    """pxla_pmap lowered where there are no devices to map over (e.g. inside jax.jit)."""


#: Lowering outside pxla_mlir's own modules (jax.jit): set by the jit
#: integration; None means "raise a clear error".
FOREIGN_CONTEXT_RULE: dict[str, Any] = {"rule": None}


def _lowering(ctx, *in_nodes, jaxpr, axis_name, axis_size, in_axes, out_axes, name, devices, backend,
              donated, options):
    mctx = ctx.module_context
    mesh = sharding_impls_mesh(mctx.axis_context)
    if mesh is None:
        rule = FOREIGN_CONTEXT_RULE["rule"]
        if rule is None:
            raise UnsupportedContext(
                f"pxla_mlir.pmap {name!r} cannot be lowered inside jax.jit or another jax transformation that "
                f"compiles with jax's own pipeline; use pxla_mlir.jit, or call the pmap outside jax.jit")
        return rule(ctx, *in_nodes, jaxpr=jaxpr, axis_name=axis_name, axis_size=axis_size, in_axes=in_axes,
                    out_axes=out_axes, name=name)
    if devices is not None:
        raise ValueError(f"nested pmap {name!r} was given devices=; only the outermost pmap chooses devices")
    names, sizes, stride = extend_mesh(tuple(mesh.axis_names), tuple(mesh.axis_sizes), axis_name, axis_size)
    # A fresh lowering cache: jax's cache key ignores the axis context.
    sub_ctx = mctx.replace(axis_context=spmd_axis_context(names, sizes), lowering_cache={})
    kw = dict(axis_size=axis_size, axis_name=axis_name, stride=stride)
    body_in = [x if a is None else _placeholder("pxla.shard", x, bav, mctx, axis=a, **kw)
               for x, a, bav in zip(in_nodes, in_axes, jaxpr.in_avals)]
    with core.extend_axis_env_nd([(axis_name, axis_size)]):
        outs, tokens_out = jax_mlir.jaxpr_subcomp(
            sub_ctx, jaxpr.jaxpr, ctx.name_stack.extend(f"pmap({name})"), ctx.tokens_in, (), *body_in,
            dim_var_values=ctx.dim_var_values, const_lowering=ctx.const_lowering,
            outer_traceback=ctx.traceback)
    ctx.set_tokens_out(tokens_out)
    return [y if a is None else _placeholder("pxla.unshard", y, oav, mctx, axis=a, **kw)
            for y, a, oav in zip(outs, out_axes, ctx.avals_out)]


# cacheable=False: the lowering cache key ignores the axis context.
jax_mlir.register_lowering(pxla_pmap_p, _lowering, cacheable=False)
