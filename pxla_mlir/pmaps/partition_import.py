"""Import of a partitioned pmap body: jax's sharding constraints become pxla placeholders.

jax lowers the body (manual over the pmap axis, automatic over the partition
axes) with Shardy on, so each ``with_sharding_constraint`` is an
``sdy.sharding_constraint`` naming automatic axes on a mesh symbol of its
own. The pxla form states the layout once (``pxla.mesh``,
``pxla.manual_axes``) and leaves the output form to the pipeline, so here
each constraint becomes ``@pxla.sharding_constraint`` with ``pxla.dims``
(pxla-expand-sharding-constraints writes it as Shardy or GSPMD), and jax's
mesh symbols go. jax also puts an all-open constraint (``[{?}, {?}]``, no
axes) after every op of a partially manual body; those say nothing and are
dropped.

jax lowers ``axis_index`` in a partially manual body (also a nested pmap's
slice in a partitioned nest, :mod:`.nested_pmaps`) as an ``sdy.manual_computation``
over the automatic axes; those stay, and so does jax's mesh symbol they
name (the module's mesh: pxla-add-sdy-mesh finds it there). The GSPMD form
cannot state them: :func:`check_dialect` refuses that before any pass sees
the module.
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import sdy

from pxla_mlir.jaxbridge.jax_internals import core, jax_mlir
from pxla_mlir.mlir.core import ir_utils, shardy
from pxla_mlir.mlir.core.pxla_attrs import DIMS, SHARDING_CONSTRAINT, dims_attr
from pxla_mlir.pmaps.arguments import PmapUsageError

__all__ = ["convert_constraints", "check_dialect", "check_callbacks", "refuse_callbacks"]

#: Host callbacks with results: jax's lowering of a partially manual program refuses them before
#: any lowered module would show them.
_CALLBACKS = frozenset({"io_callback", "pure_callback"})


def _calls_back(jaxpr) -> bool:
    jaxpr = jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr
    return any(e.primitive.name in _CALLBACKS or any(_calls_back(s) for s in core.jaxprs_in_params(e.params))
               for e in jaxpr.eqns)


def check_callbacks(jaxpr, name: str) -> None:
    """Refuses a partitioned body that calls back to the host with results, before jax lowers it."""
    if _calls_back(jaxpr):
        refuse_callbacks(name)


def refuse_callbacks(name: str):
    raise PmapUsageError(f"pmap {name!r} has partitions= and host callbacks in its body (jax.debug.print, "
                         f"pure_callback, io_callback): a partitioned body cannot call back to the host yet; call "
                         f"back outside the pmap, from its results")


def convert_constraints(module: ir.Module) -> None:
    with module.context, module.operation.location:
        ops = list(ir_utils.walk(module.operation))
        manual = any(op.name == shardy.MANUAL_COMPUTATION for op in ops)
        for op in ops:
            if op.name == "sdy.sharding_constraint":
                _convert(op)
        if manual:
            return  # they name jax's mesh (see the module docs)
        for op in [o.operation for o in module.body.operations]:
            if op.name == "sdy.mesh":
                op.erase()


def _convert(op: ir.Operation) -> None:
    sharding = sdy.TensorShardingAttr(op.attributes["sharding"])
    if list(sharding.unreduced_axes):
        raise PmapUsageError(f"a sharding constraint with unreduced axes ({sharding}) is not supported inside a "
                             f"partitioned pmap body")
    dims = []
    for entry in sharding.dimension_shardings:
        dim = sdy.DimensionShardingAttr(entry)
        axes = [sdy.AxisRefAttr(a) for a in dim.axes]
        if any(a.sub_axis_info is not None for a in axes):
            raise PmapUsageError(f"a sharding constraint on part of a mesh axis ({sharding}) is not supported "
                                 f"inside a partitioned pmap body: name whole partition axes")
        if not dim.is_closed and axes:
            raise PmapUsageError(f"a sharding constraint that is open on a split dimension ({sharding}) is not "
                                 f"supported inside a partitioned pmap body")
        dims.append(None if not dim.is_closed else [a.name for a in axes])
    value = op.operands[0]
    if all(d is None for d in dims):  # jax's all-open marker (or a scalar): no constraint
        op.results[0].replace_all_uses_with(value)
        op.erase()
        return
    with ir.InsertionPoint(op), op.location:
        call = jax_mlir.custom_call(SHARDING_CONSTRAINT, result_types=[value.type], operands=[value],
                                    extra_attributes={DIMS: dims_attr(dims)})
    op.results[0].replace_all_uses_with(call.result)
    op.erase()


def check_dialect(module: ir.Module, dialect: str, what: str) -> None:
    """Refuses a GSPMD-form program whose body holds jax's Shardy manual computations (see the module docs)."""
    if dialect != "gspmd" or not any(op.name == shardy.MANUAL_COMPUTATION for op in ir_utils.walk(module.operation)):
        return
    raise PmapUsageError(f"{what} uses the device index inside a partitioned body (lax.axis_index, or a nested "
                         f"pmap's slice of its arguments): jax lowers it as an sdy.manual_computation, which the "
                         f"GSPMD form cannot state; use shardings=\"sdy\" (the default)")
