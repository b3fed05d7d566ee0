"""The ``pxla_pmap`` primitive: a pmap as one equation of a jaxpr.

Binding it at the top level runs the compiled program (the impl, in
:mod:`.stage`); inside an outer pmap's trace it is staged, and its lowering
rule (:mod:`.mlir_rule`) emits the ``@pxla.shard`` / ``@pxla.unshard``
placeholders around the inner body, so a nested pmap becomes part of the
outer pmap's module (2022 semantics: one program over the product of the
axis sizes). Transformation rules live in :mod:`.rules`; :mod:`.kind`
wires all of them.

Params: ``jaxpr`` (the per-shard body, a ClosedJaxpr without consts),
``axis_name``, ``axis_size``, ``in_axes``/``out_axes`` (tuples of int or
None), ``name``, and the top-level-only ``devices``, ``backend``,
``donated`` (tuple of bool) and ``options`` (a ``PmapPipeline``: mode and
unshard strategy), and ``partitions`` ((name, size) pairs: the partition axes
a partitioned body is split over, :mod:`.partitions`; empty for others).
"""

from __future__ import annotations

import math

from pxla_mlir.jaxbridge.jax_internals import core, pe
from pxla_mlir.mlir.ir.pxla_attrs import REP_AXIS
from pxla_mlir.mlir.pipelines import PmapPipeline

__all__ = ["pxla_pmap_p", "bind", "abstract_eval", "REP_AXIS", "replicas_needed", "extend_mesh"]

pxla_pmap_p = core.Primitive("pxla_pmap")
pxla_pmap_p.multiple_results = True


def bind(closed: core.ClosedJaxpr, args, *, axis_name, axis_size: int, in_axes, out_axes, name: str,
         devices=None, backend=None, donated=None, options: PmapPipeline | None = None, partitions: tuple = ()):
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
                            donated=donated, options=options or PmapPipeline(), partitions=tuple(partitions))


def abstract_eval(*avals, jaxpr, axis_name, axis_size, in_axes, out_axes, partitions=(), **_):
    outs = [core.unmapped_aval(axis_size, a, av) if a is not None else av
            for av, a in zip(jaxpr.out_avals, out_axes)]
    if partitions:  # a partitioned body's values carry its mesh; outside, the results are plain arrays
        outs = [core.ShapedArray(av.shape, av.dtype, weak_type=av.weak_type) for av in outs]
    # The pmap binds its own axis; outer axis names used inside stay visible.
    return outs, core.filter_named_axis_effects(jaxpr.effects, {axis_name})


pxla_pmap_p.def_effectful_abstract_eval(abstract_eval)


def _typecheck(_ctx_factory, *in_atoms, jaxpr, axis_name, axis_size, in_axes, out_axes, **params):
    for v, x, a in zip(jaxpr.jaxpr.invars, in_atoms, in_axes):
        want = core.mapped_aval(axis_size, a, x.aval) if a is not None else x.aval
        if not core.typecompat(v.aval, want):
            raise core.JaxprTypeError(f"pxla_pmap binder {v.aval} does not match the sharded operand {want}")
    # jax would check the body without this pmap's axis bound.
    with core.extend_axis_env_nd([(axis_name, axis_size)]):
        core.check_jaxpr(jaxpr.jaxpr)
    return abstract_eval(jaxpr=jaxpr, axis_name=axis_name, axis_size=axis_size, in_axes=in_axes,
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
