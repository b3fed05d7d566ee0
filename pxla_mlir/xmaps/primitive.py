"""The ``pxla_xmap`` primitive: an xmap as one equation of a jaxpr.

Binding it with concrete arguments runs the compiled program (the impl, in
:mod:`.lower`); under jax transformations its rules (:mod:`.rules`, shared
with pmap through :mod:`pxla_mlir.maps.rules`) make new xmaps; inside an
enclosing xmap it is evaluated in place by the interpreter (tiled over its
own resources), inside a pmap body or ``jax.jit`` its lowering rule
(:mod:`.mlir_rule`) takes over.

Params: ``jaxpr`` (the per-element body, a ClosedJaxpr without consts),
``in_axes``/``out_axes`` (per operand/result, ``((dim, name), ...)``),
``axis_sizes`` (``((name, global size), ...)`` in plan order),
``axis_resources`` (``((name, resources), ...)``), ``loops`` (``((loop,
length), ...)``), ``mesh`` (a pxla_mlir Mesh or None), ``options`` (an ``XmapPipeline``: lowering and sharding dialect),
``name``, ``donated`` (tuple of bool), ``backend`` and ``fixed_sharding``
(``ensure_fixed_sharding``: the vectorize lowering constrains every
intermediate).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeAlias

from pxla_mlir.jaxbridge.jax_internals import core, pe
from pxla_mlir.xmaps.plan import Plan

if TYPE_CHECKING:
    from jax.core import ShapedArray
    from jax.extend.core import ClosedJaxpr

    from pxla_mlir.mlir.pipelines import XmapPipeline
    from pxla_mlir.mlir.sharding import Mesh

__all__ = ["pxla_xmap_p", "XmapParams", "bind", "abstract_eval", "plan_of", "spec_of", "mapping_of", "insert_axes"]

pxla_xmap_p = core.Primitive("pxla_xmap")
pxla_xmap_p.multiple_results = True


#: One value's named dimensions as a hashable param: ``((dim, name), ...)``, by dimension.
NamedDims: TypeAlias = tuple[tuple[int, str], ...]


def spec_of(mapping: Mapping[int, str]) -> NamedDims:
    """A ``{dim: name}`` mapping as a hashable param."""
    return tuple(sorted((int(d), n) for d, n in mapping.items()))


def mapping_of(spec: NamedDims) -> dict[int, str]:
    return dict(spec)


def names_of(spec: NamedDims) -> frozenset[str]:
    return frozenset(n for _, n in spec)


@functools.lru_cache(maxsize=256)
def _plan(axis_sizes: tuple, axis_resources: tuple, loops: tuple, mesh_shape: tuple) -> Plan:
    return Plan(tuple(n for n, _ in axis_sizes), dict(axis_sizes), dict(axis_resources), dict(mesh_shape),
                dict(loops))


def plan_of(p) -> Plan:
    mesh = p["mesh"]
    mesh_shape = tuple(mesh.shape.items()) if mesh is not None else ()
    return _plan(p["axis_sizes"], p["axis_resources"], p["loops"], mesh_shape)


def insert_axes(aval, spec, sizes: Mapping[str, int]) -> ShapedArray:
    """A body aval with the named dimensions of ``spec`` put back (global sizes)."""
    shape = list(aval.shape)
    for d, n in sorted(spec):
        shape.insert(d, sizes[n])
    return core.ShapedArray(tuple(shape), aval.dtype, weak_type=aval.weak_type)


def delete_axes(aval, spec) -> ShapedArray:
    dims = {d for d, _ in spec}
    return core.ShapedArray(tuple(s for d, s in enumerate(aval.shape) if d not in dims), aval.dtype,
                            weak_type=aval.weak_type)


@dataclasses.dataclass(frozen=True, slots=True)
class XmapParams:
    """An xmap besides its body: the ``pxla_xmap`` equation's params less
    ``jaxpr`` (see the module docs), as bind takes them. Hashable, as jax's
    params must be."""

    in_axes: tuple[NamedDims, ...]  # per operand
    out_axes: tuple[NamedDims, ...]  # per result
    axis_sizes: tuple[tuple[str, int], ...]  # (name, global size), in plan order
    axis_resources: tuple[tuple[str, tuple[str, ...]], ...]  # (name, mesh axes and loops)
    loops: tuple[tuple[str, int], ...]  # (loop, length)
    mesh: Mesh | None
    options: XmapPipeline
    name: str
    donated: tuple[bool, ...] | None = None  # None: none donated (filled in by bind)
    backend: str | None = None
    fixed_sharding: bool = False

    def __post_init__(self):
        for field in ("in_axes", "out_axes", "axis_sizes", "axis_resources", "loops"):
            object.__setattr__(self, field, tuple(getattr(self, field)))
        if self.donated is not None:
            object.__setattr__(self, "donated", tuple(self.donated))
        object.__setattr__(self, "fixed_sharding", bool(self.fixed_sharding))

    @classmethod
    def of(cls, params: Mapping) -> XmapParams:
        """From a ``pxla_xmap`` equation's params (its ``jaxpr`` left out)."""
        return cls(**{name: params[name] for name in _FIELDS if name in params})

    def eqn_params(self) -> dict:
        """The equation's params, less ``jaxpr``."""
        return {name: getattr(self, name) for name in _FIELDS}


_FIELDS = tuple(f.name for f in dataclasses.fields(XmapParams))


def bind(closed: ClosedJaxpr, args, params: XmapParams):
    """Binds pxla_xmap_p; consts of ``closed`` become broadcast operands, so
    no lowering sees constvars and closures over outer tracers are legal."""
    args = list(args)
    donated = params.donated if params.donated is not None else (False,) * len(args)
    if closed.consts:
        with core.extend_axis_env_nd(list(params.axis_sizes)):
            jaxpr = pe.convert_constvars_jaxpr(closed.jaxpr)
        n = len(closed.consts)
        args = list(closed.consts) + args
        params = dataclasses.replace(params, in_axes=((),) * n + params.in_axes)
        donated = (False,) * n + donated
        closed = core.ClosedJaxpr(jaxpr, ())
    return pxla_xmap_p.bind(*args, jaxpr=closed, **dataclasses.replace(params, donated=donated).eqn_params())


def abstract_eval(*avals, jaxpr, out_axes, axis_sizes, **_):
    sizes = dict(axis_sizes)
    outs = [insert_axes(av, spec, sizes) for av, spec in zip(jaxpr.out_avals, out_axes)]
    # The xmap binds its own names; names of enclosing maps used inside stay visible.
    return outs, core.filter_named_axis_effects(jaxpr.effects, set(sizes))


pxla_xmap_p.def_effectful_abstract_eval(abstract_eval)


def _typecheck(_ctx_factory, *in_atoms, jaxpr, in_axes, axis_sizes, **params):
    for v, x, spec in zip(jaxpr.jaxpr.invars, in_atoms, in_axes):
        want = delete_axes(x.aval, spec)
        if not core.typecompat(v.aval, want):
            raise core.JaxprTypeError(f"pxla_xmap binder {v.aval} does not match the operand {x.aval} without "
                                      f"its named dimensions {dict(spec)}")
    with core.extend_axis_env_nd(list(axis_sizes)):
        core.check_jaxpr(jaxpr.jaxpr)
    return abstract_eval(jaxpr=jaxpr, axis_sizes=axis_sizes, **params)


core.custom_typechecks[pxla_xmap_p] = _typecheck
