"""The lowering rules of ``pxla_pmap``: where a bound pmap becomes MHLO.

* Inside a pxla_mlir module (a manual SPMD context over an abstract mesh):
  the nested pmap's body is lowered in place on the mesh extended by its
  axis, between ``@pxla.shard`` / ``@pxla.unshard`` placeholders that the
  pmap pipeline's passes expand (2022's nested pmap: one program over the
  product of the axis sizes).
* Inside ``jax.jit`` (jax's own pipeline): a manual computation over the
  pmap's devices, as jax.jit of jax.pmap (:mod:`.under_jit`).
"""

from __future__ import annotations

from ..ir.pxla_attrs import SHARD, UNSHARD, placeholder_attrs
from ..jax_internals import core, jax_mlir, sharding_impls_mesh, spmd_axis_context
from . import under_jit
from .partitions import refuse_nested_partitions
from .primitive import extend_mesh, pxla_pmap_p
from .under_jit import PmapInsideJitWarning

__all__ = ["PmapInsideJitWarning", "register"]


def _placeholder(target: str, x, out_aval, mctx, **attrs):
    op = jax_mlir.custom_call(target, result_types=[jax_mlir.aval_to_ir_type(mctx, out_aval)], operands=[x],
                              extra_attributes=placeholder_attrs(**attrs))
    return op.result


def _lowering(ctx, *in_nodes, jaxpr, axis_name, axis_size, in_axes, out_axes, name, devices, backend,
              donated, options, partitions=()):
    mctx = ctx.module_context
    mesh = sharding_impls_mesh(mctx.axis_context)
    if partitions and (mesh is not None or under_jit.inside()):
        refuse_nested_partitions(name, partitions)
    if under_jit.inside():  # nested in a pmap lowering inside jax.jit
        return under_jit.lower_inside(ctx, *in_nodes, jaxpr=jaxpr, axis_name=axis_name, axis_size=axis_size,
                                      in_axes=in_axes, out_axes=out_axes, name=name)
    if mesh is None:  # inside jax.jit
        return under_jit.lower(ctx, *in_nodes, jaxpr=jaxpr, axis_name=axis_name, axis_size=axis_size,
                               in_axes=in_axes, out_axes=out_axes, name=name, devices=devices, backend=backend,
                               partitions=partitions)
    if devices is not None:
        raise ValueError(f"nested pmap {name!r} was given devices=; only the outermost pmap chooses devices")
    names, sizes, stride = extend_mesh(tuple(mesh.axis_names), tuple(mesh.axis_sizes), axis_name, axis_size)
    # A fresh lowering cache: jax's cache key ignores the axis context.
    sub_ctx = mctx.replace(axis_context=spmd_axis_context(names, sizes), lowering_cache={})
    kw = dict(axis_size=axis_size, axis_name=axis_name, stride=stride)
    body_in = [x if a is None else _placeholder(SHARD, x, bav, mctx, axis=a, **kw)
               for x, a, bav in zip(in_nodes, in_axes, jaxpr.in_avals)]
    with core.extend_axis_env_nd([(axis_name, axis_size)]):
        outs, tokens_out = jax_mlir.jaxpr_subcomp(
            sub_ctx, jaxpr.jaxpr, ctx.name_stack.extend(f"pmap({name})"), ctx.tokens_in, (), *body_in,
            dim_var_values=ctx.dim_var_values, const_lowering=ctx.const_lowering,
            outer_traceback=ctx.traceback)
    ctx.set_tokens_out(tokens_out)
    return [y if a is None else _placeholder(UNSHARD, y, oav, mctx, axis=a, **kw)
            for y, a, oav in zip(outs, out_axes, ctx.avals_out)]


def register() -> None:
    # cacheable=False: jax's lowering cache key ignores the axis context.
    jax_mlir.register_lowering(pxla_pmap_p, _lowering, cacheable=False)
    under_jit.register()  # jax.jit learns a pmap's devices
