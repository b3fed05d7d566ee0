"""The lowering rules of ``pxla_pmap``: where a bound pmap becomes MHLO.

* Inside a pxla_mlir module (a manual SPMD context over an abstract mesh):
  the nested pmap's body is lowered in place on the mesh extended by its
  axis, between ``@pxla.shard`` / ``@pxla.unshard`` placeholders that the
  pmap pipeline's passes expand (2022's nested pmap: one program over the
  product of the axis sizes).
* Inside ``jax.jit`` (jax's own pipeline, no replicas): the pmap is
  evaluated as ``jax.vmap`` over its axis on jit's devices, with a one-time
  :class:`PmapInsideJitWarning`; ``pxla_mlir.jit`` keeps the devices.
"""

from __future__ import annotations

import warnings

import jax

from ..ir.pxla_attrs import SHARD, UNSHARD, placeholder_attrs
from ..jax_internals import core, jax_mlir, sharding_impls_mesh, spmd_axis_context
from .partitions import refuse_nested_partitions
from .primitive import extend_mesh, pxla_pmap_p

__all__ = ["PmapInsideJitWarning", "register"]


class PmapInsideJitWarning(UserWarning):
    """pxla_mlir.pmap under jax.jit runs as jax.vmap on jit's devices."""


def _placeholder(target: str, x, out_aval, mctx, **attrs):
    op = jax_mlir.custom_call(target, result_types=[jax_mlir.aval_to_ir_type(mctx, out_aval)], operands=[x],
                              extra_attributes=placeholder_attrs(**attrs))
    return op.result


def _lowering(ctx, *in_nodes, jaxpr, axis_name, axis_size, in_axes, out_axes, name, devices, backend,
              donated, options, partitions=()):
    mctx = ctx.module_context
    mesh = sharding_impls_mesh(mctx.axis_context)
    if partitions:
        refuse_nested_partitions(name, partitions, inside_jax_jit=mesh is None)
    if mesh is None:
        return _under_jax_jit(ctx, *in_nodes, jaxpr=jaxpr, axis_name=axis_name, axis_size=axis_size,
                              in_axes=in_axes, out_axes=out_axes, name=name)
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


_warned: set = set()


def _under_jax_jit(ctx, *in_nodes, jaxpr, axis_name, axis_size, in_axes, out_axes, name):
    """jax.jit compiles with jax's pipeline and no replicas: evaluate the pmap
    as jax.vmap over its axis (same numbers, no device parallelism)."""
    if name not in _warned:
        _warned.add(name)
        warnings.warn(PmapInsideJitWarning(
            f"pxla_mlir.pmap {name!r} inside jax.jit runs as jax.vmap over its axis on jit's device(s): same "
            f"results, but the work is not spread over {axis_size} devices. Use pxla_mlir.jit to keep the "
            f"pmap on its devices."), stacklevel=2)
    fn = jax.vmap(lambda *xs: tuple(core.jaxpr_as_fun(jaxpr)(*xs)), in_axes=in_axes, out_axes=out_axes,
                  axis_name=axis_name, axis_size=axis_size)
    return jax_mlir.lower_fun(lambda *xs: fn(*xs), multiple_results=True)(ctx, *in_nodes)


def register() -> None:
    # cacheable=False: jax's lowering cache key ignores the axis context.
    jax_mlir.register_lowering(pxla_pmap_p, _lowering, cacheable=False)
