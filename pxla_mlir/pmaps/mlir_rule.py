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

import contextlib
from collections.abc import Sequence

from jax.sharding import AbstractMesh, AxisType, use_abstract_mesh

from pxla_mlir.jaxbridge.jax_internals import core, jax_mlir
from pxla_mlir.jaxbridge.stablehlo_lowering import sharding_impls_mesh, spmd_axis_context
from pxla_mlir.mlir.core.pxla_attrs import SHARD, UNSHARD, placeholder_attrs
from pxla_mlir.pmaps import under_jit
from pxla_mlir.pmaps.partition_mesh import device_kind
from pxla_mlir.pmaps.primitive import JIT_AXIS, PmapParams, extend_mesh, pxla_pmap_p
from pxla_mlir.pmaps.under_jit import PmapInsideJitWarning
from pxla_mlir.stages.devices import DevicesError

__all__ = ["PmapInsideJitWarning", "register"]


def _placeholder(target: str, x, out_aval, mctx, **attrs):
    op = jax_mlir.custom_call(target, result_types=[jax_mlir.aval_to_ir_type(mctx, out_aval)], operands=[x],
                              extra_attributes=placeholder_attrs(**attrs))
    return op.result


def _lowering(ctx, *in_nodes, jaxpr, **eqn_params):
    p = PmapParams.of(eqn_params)
    mctx = ctx.module_context
    mesh = sharding_impls_mesh(mctx.axis_context)
    # A level of a nest lowered as one manual computation over all its pmap axes (a partitioned pmap nested in
    # pmaps, :mod:`.nested_pmaps`): the mesh has this pmap's axis already.
    level = (mesh is not None and p.axis_name in mesh.axis_names
             and set(mctx.axis_context.manual_axes) != set(mesh.axis_names))
    if not level and (mesh is not None or under_jit.inside()):
        p.partitioning.refuse_nesting(p.name)
    if under_jit.inside() or level:  # nested in a pmap lowering inside jax.jit, or a level of such a nest
        # jax lowers axis_index in a partially manual program under the mesh it is manual over
        with use_abstract_mesh(_manual_mesh(mctx, mesh)) if mesh is not None and level else contextlib.nullcontext():
            return under_jit.lower_inside(ctx, in_nodes, jaxpr, p)
    if mesh is None:  # inside jax.jit
        return under_jit.lower(ctx, in_nodes, jaxpr, p)
    if p.devices is not None:
        _refuse_devices(p, p.devices, mesh)
    names, sizes, stride = extend_mesh(tuple(mesh.axis_names), tuple(mesh.axis_sizes), p.axis_name, p.axis_size)
    # A fresh lowering cache: jax's cache key ignores the axis context.
    sub_ctx = mctx.replace(axis_context=spmd_axis_context(names, sizes), lowering_cache={})
    kw = dict(axis_size=p.axis_size, axis_name=p.axis_name, stride=stride)
    body_in = [x if a is None else _placeholder(SHARD, x, bav, mctx, axis=a, **kw)
               for x, a, bav in zip(in_nodes, p.in_axes, jaxpr.in_avals)]
    with core.extend_axis_env_nd([(p.axis_name, p.axis_size)]):
        outs, tokens_out = jax_mlir.jaxpr_subcomp(
            sub_ctx, jaxpr.jaxpr, ctx.name_stack.extend(f"pmap({p.name})"), ctx.tokens_in, (), *body_in,
            dim_var_values=ctx.dim_var_values, const_lowering=ctx.const_lowering,
            outer_traceback=ctx.traceback)
    ctx.set_tokens_out(tokens_out)
    return [y if a is None else _placeholder(UNSHARD, y, oav, mctx, axis=a, **kw)
            for y, a, oav in zip(outs, p.out_axes, ctx.avals_out)]


def _refuse_devices(p: PmapParams, devices: Sequence, mesh) -> None:
    """A pmap lowered into an enclosing program cannot choose its devices: the program's owner does."""
    listed = [d.id for d in devices]
    if tuple(mesh.axis_names) == (JIT_AXIS,):  # directly in a pxla_mlir.jit body, a pmap of size 1
        raise DevicesError(f"pmap {p.name!r} inside a pxla_mlir.jit function was given devices={listed}; inside "
                           f"pxla_mlir.jit the devices come from the jit: pass them as pxla_mlir.jit(f, "
                           f"devices=...) and leave devices= out of the pmap (or call the pmap outside the jit)")
    raise DevicesError(f"nested pmap {p.name!r} was given devices={listed}; only the outermost pmap chooses "
                       f"devices: pass them to the outermost pmap (or to pxla_mlir.jit(devices=...) when it is "
                       f"inside one) and leave devices= out of the nested pmap")


def _manual_mesh(mctx, spmd_mesh):
    """The abstract mesh of a manual lowering context (whose mesh is ``spmd_mesh``), its manual axes typed so, on
    its platform's devices (as the body was traced under it, :meth:`.partition_strategy.Partitioning.tracing`)."""
    mesh = spmd_mesh.abstract_mesh
    types = tuple(AxisType.Manual if a in mctx.axis_context.manual_axes else t
                  for a, t in zip(mesh.axis_names, mesh.axis_types))
    return AbstractMesh(mesh.axis_sizes, mesh.axis_names, axis_types=types,
                        abstract_device=mesh.abstract_device or device_kind(mctx.platforms[0]))


def register() -> None:
    # cacheable=False: jax's lowering cache key ignores the axis context.
    jax_mlir.register_lowering(pxla_pmap_p, _lowering, cacheable=False)
    under_jit.register()  # jax.jit learns a pmap's devices
