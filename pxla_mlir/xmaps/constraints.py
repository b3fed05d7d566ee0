"""Sharding constraints inside the global view (the vectorize lowering).

XLA's SPMD partitioner splits the global view by the layouts it is told and
propagates the rest. 2022's SPMD lowering told it more than the boundaries:
a nested xmap's operands and results were constrained to the tiling the
user mapped (``with_sharding_constraint``), and with
``experimental_xmap_ensure_fixed_sharding`` every intermediate too. Here the
``pxla_sharding_constraint`` primitive marks such a value; it lowers to an
``@pxla.sharding_constraint`` placeholder (``pxla.dims``) that
pxla-expand-sharding-constraints turns into Shardy's or GSPMD's constraint.

A value inside the global view has lost the dimensions of the enclosing
named axes to ``jax.vmap``: the primitive's batching rule puts them back,
laid out on the mesh axes of the named axis vmapped there (``named``), or
left to XLA (``"?"``) for axes of other vmaps and vectorized named axes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax

from pxla_mlir.jaxbridge.jax_internals import batching, core, is_extended, jax_mlir
from pxla_mlir.maps.pxla_form import mesh_label
from pxla_mlir.mlir.core.pxla_attrs import DIMS, SHARDING_CONSTRAINT, dims_attr

__all__ = ["constrain", "pxla_sharding_constraint_p"]

pxla_sharding_constraint_p = core.Primitive("pxla_sharding_constraint")


def constrain(x, dims: Sequence[Sequence[str] | None], named: Sequence[tuple], mesh_shape: Mapping[str, int]):
    """``x`` laid out as ``dims`` says (mesh axes per dimension, major first;
    None: XLA's choice); ``named``: (named axis, its mesh axes or None) of
    the enclosing global view's vmaps. Values that no mesh axis could split
    are left alone (an xmap on one device)."""
    aval = jax.typeof(x)
    if not isinstance(aval, core.ShapedArray) or is_extended(aval.dtype):
        return x
    if not any(dims) and not any(axes for _, axes in named):
        return x
    labels = {a: mesh_label(a, i) for i, a in enumerate(mesh_shape)}
    as_labels = lambda axes: None if axes is None else tuple(labels[a] for a in axes)  # noqa: E731
    return pxla_sharding_constraint_p.bind(x, dims=tuple(as_labels(d) for d in dims),
                                           named=tuple((n, as_labels(a)) for n, a in named))


pxla_sharding_constraint_p.def_abstract_eval(lambda aval, **_: aval)


def _batched(axis_data, vals, dims_in, *, dims, named):
    (x,), (d,) = vals, dims_in
    if d is None:
        return pxla_sharding_constraint_p.bind(x, dims=dims, named=named), d
    axes = dict(named).get(axis_data.name)
    return pxla_sharding_constraint_p.bind(x, dims=dims[:d] + (axes,) + dims[d:], named=named), d


batching.fancy_primitive_batchers[pxla_sharding_constraint_p] = _batched


def _lowering(ctx, x, *, dims, named):
    (aval,) = ctx.avals_out
    op = jax_mlir.custom_call(SHARDING_CONSTRAINT, result_types=[jax_mlir.aval_to_ir_type(ctx.module_context, aval)],
                              operands=[x], extra_attributes={DIMS: dims_attr(dims)})
    return [op.result]


jax_mlir.register_lowering(pxla_sharding_constraint_p, _lowering)
