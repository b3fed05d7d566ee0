"""The ``pxla_pmap`` primitive: a pmap as one equation of a jaxpr.

Binding it at the top level runs the compiled program (the impl, in
:mod:`.lower`); inside an outer pmap's trace it is staged, and its lowering
rule (:mod:`.mlir_rule`) emits the ``@pxla.shard`` / ``@pxla.unshard``
placeholders around the inner body, so a nested pmap becomes part of the
outer pmap's module (2022 semantics: one program over the product of the
axis sizes). Transformation rules live in :mod:`.rules`; :mod:`.kind`
wires all of them.

Params: ``jaxpr`` (the per-shard body, a ClosedJaxpr without consts) and
the fields of a :class:`PmapParams`, the value the front end makes once per
call and bind, the impl, the lowering rules and import each take whole. The
equation keeps its params flat (jax prints them, and the transformation
rules shared with xmap edit them by name); :meth:`PmapParams.of` and
:meth:`PmapParams.eqn_params` go between the two.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Literal

from pxla_mlir.jaxbridge.jax_internals import core, pe
from pxla_mlir.mlir.core.pxla_attrs import REP_AXIS
from pxla_mlir.mlir.pipelines import PmapPipeline
from pxla_mlir.pmaps.partition_strategy import UNPARTITIONED, Partitioning

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr

    from pxla_mlir.runtime.executable import Device

__all__ = ["pxla_pmap_p", "PmapParams", "bind", "abstract_eval", "REP_AXIS", "JIT_AXIS", "replicas_needed",
           "extend_mesh"]

#: The axis of a pxla_mlir.jit body lowered as a pmap of size 1 (every value broadcast).
JIT_AXIS = "_pxla_jit"

pxla_pmap_p = core.Primitive("pxla_pmap")
pxla_pmap_p.multiple_results = True


@dataclasses.dataclass(frozen=True, slots=True)
class PmapParams:
    """A pmap's axis, how its operands and results map onto it, where it runs
    and how it lowers. Hashable, as jax's params must be."""

    axis_name: Hashable
    axis_size: int
    in_axes: tuple[int | None, ...]  # per operand: the mapped dimension, or None (broadcast)
    out_axes: tuple[int | None, ...]  # per result
    name: str
    devices: tuple[Device, ...] | None = None  # top level only; None: the first local devices
    backend: str | None = None
    donated: tuple[bool, ...] | None = None  # per operand; None: none donated (filled in by bind)
    options: PmapPipeline = PmapPipeline()  # mode and unshard strategy
    partitioning: Partitioning = UNPARTITIONED  # of a partitioned body (.partitions): its own partition axes
    pieces: Literal["on", "off"] = "on"  # nested pmaps' values enter and leave by piece where they can (import)

    def __post_init__(self):
        for field in ("in_axes", "out_axes"):
            object.__setattr__(self, field, tuple(getattr(self, field)))
        if self.donated is not None:
            object.__setattr__(self, "donated", tuple(self.donated))
        if self.options is None:
            object.__setattr__(self, "options", PmapPipeline())

    @classmethod
    def of(cls, params: Mapping) -> PmapParams:
        """From a ``pxla_pmap`` equation's params (its ``jaxpr`` left out)."""
        return cls(**{name: params[name] for name in _FIELDS if name in params})

    def eqn_params(self) -> dict:
        """The equation's params, less ``jaxpr``."""
        return {name: getattr(self, name) for name in _FIELDS}

    @property
    def donation(self) -> tuple[bool, ...]:
        """Per operand: is it donated (none are where bind has not filled ``donated`` in)."""
        return self.donated if self.donated is not None else (False,) * len(self.in_axes)

    def replace(self, **changes) -> PmapParams:
        return dataclasses.replace(self, **changes)

    def broadcasting(self, n: int) -> PmapParams:
        """With ``n`` more leading operands, broadcast and not donated (a body's hoisted constants)."""
        if not n:
            return self
        donated = None if self.donated is None else (False,) * n + self.donated
        return self.replace(in_axes=(None,) * n + self.in_axes, donated=donated)


_FIELDS = tuple(f.name for f in dataclasses.fields(PmapParams))


def bind(closed: ClosedJaxpr, args, params: PmapParams):
    """Binds pxla_pmap_p; consts of ``closed`` become broadcast operands, so the
    lowering never sees constvars and closures over outer tracers are legal."""
    args = list(args)
    if params.donated is None:
        params = params.replace(donated=(False,) * len(args))
    if closed.consts:
        with core.extend_axis_env_nd([(params.axis_name, params.axis_size)]):
            jaxpr = pe.convert_constvars_jaxpr(closed.jaxpr)
        args = list(closed.consts) + args
        params = params.broadcasting(len(closed.consts))
        closed = core.ClosedJaxpr(jaxpr, ())
    return pxla_pmap_p.bind(*args, jaxpr=closed, **params.eqn_params())


def abstract_eval(*avals, jaxpr, axis_name, axis_size, in_axes, out_axes, partitioning=UNPARTITIONED, **_):
    outs = [core.unmapped_aval(axis_size, a, av) if a is not None else av
            for av, a in zip(jaxpr.out_avals, out_axes)]
    # The pmap binds its own axis; outer axis names used inside stay visible.
    return partitioning.global_results(outs), core.filter_named_axis_effects(jaxpr.effects, {axis_name})


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
