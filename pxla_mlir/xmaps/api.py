"""``pxla_mlir.xmap``: named axes mapped onto a device mesh (2022 xmap).

    with pxla_mlir.Mesh(devices, ("x", "y")):
        f = pxla_mlir.xmap(fn, in_axes=["batch", ...], out_axes=["batch", ...],
                           axis_resources={"batch": "x"})
        f(x)  # jax.Arrays sharded over the mesh as out_axes and axis_resources say

Three lowerings (``lowering=``), all giving the same numbers:

* ``"replica"`` (default): each mesh device is a replica running the tiled
  body with cross-replica collectives (2022's non-SPMD path; no XLA
  partitioner involved, so nothing deprecated is relied on);
* ``"manual"``: the same tiled body inside one SPMD manual region
  (``sdy.manual_computation``, or with ``shardings="gspmd"``
  ``@SPMDFullToShardShape`` / ``@SPMDShardToFullShape``);
* ``"vectorize"``: the global view (every named axis vmapped), arguments and
  results annotated with ``sdy.sharding`` (or ``mhlo.sharding``); XLA's SPMD
  partitioner splits it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Mapping

import jax
import numpy as np
from jax import tree_util
from jax.sharding import Mesh as JaxMesh, NamedSharding, PartitionSpec

from ..invariance import named_shapes
from ..jax_internals import api_util, core, source_info_util
from ..pipelines import XmapPipeline, choices, configure
from ..sharding.mesh import Mesh, current_mesh
from ..stages import STATS, Lowered, Signature, timed
from ..tracing import trace_flat
from .importer import import_xmap
from .plan import Plan, XmapError, check_resource_clash, make_plan, out_entry_rank, parse_entry

__all__ = ["xmap", "XmapFunction", "LOWERINGS"]

LOWERINGS = choices(XmapPipeline, "lowering")


class _Axes:
    """One in_axes/out_axes entry, opaque to pytree flattening (lists are specs here)."""

    def __init__(self, spec):
        self.spec = spec

    def __repr__(self):
        return repr(self.spec)


def _is_spec(x) -> bool:
    """An axes entry: {dim: name} (int keys; {} = no named axes) or a list of
    names / None / ...; dicts with other keys are pytree containers."""
    if isinstance(x, Mapping):
        return all(isinstance(k, (int, np.integer)) for k in x)
    return isinstance(x, list) and all(e is None or e is Ellipsis or isinstance(e, str) for e in x)


def _wrap_specs(tree):
    return tree_util.tree_map(_Axes, tree, is_leaf=_is_spec)


def _flatten_specs(what: str, value_tree, spec_tree) -> list:
    if _is_spec(spec_tree):  # one spec for every value
        return [spec_tree] * value_tree.num_leaves
    wrapped = _wrap_specs(spec_tree)
    if value_tree.num_leaves and isinstance(wrapped, _Axes):
        return [wrapped.spec] * value_tree.num_leaves
    try:
        return [a.spec if isinstance(a, _Axes) else ({} if a is None else a)
                for a in api_util.flatten_axes(what, value_tree, wrapped)]
    except ValueError as e:
        raise XmapError(str(e).replace("specification must be a tree prefix", "must be a tree prefix")) from None


@dataclasses.dataclass(frozen=True)
class _Traced:
    plan: Plan
    user: core.ClosedJaxpr
    in_tree: Any
    out_tree: Any
    in_maps: tuple
    out_maps: tuple
    global_in: tuple
    global_out: tuple
    donated: tuple


class XmapFunction:
    def __init__(self, fun: Callable, in_axes, out_axes, *, axis_sizes: Mapping, axis_resources: Mapping,
                 donate_argnums, backend, lowering: str, shardings: str = XmapPipeline.sharding_dialect):
        self.options = configure(XmapPipeline, lowering=lowering, shardings=shardings)
        self._init = dict(axis_sizes=axis_sizes, axis_resources=axis_resources, donate_argnums=donate_argnums,
                          backend=backend, lowering=lowering, shardings=shardings)
        self.fun, self.in_axes, self.out_axes = fun, in_axes, out_axes
        self.axis_sizes, self.axis_resources = dict(axis_sizes), dict(axis_resources)
        self.donate_argnums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
        self.backend, self.lowering = backend, lowering
        self.name = getattr(fun, "__name__", "fun")
        self._cache: dict = {}
        functools.update_wrapper(self, fun, updated=())

    def with_options(self, **options) -> "XmapFunction":
        """The same xmap with other options (e.g. ``lowering``, ``shardings``), fresh caches."""
        unknown = set(options) - set(self._init)
        if unknown:
            raise TypeError(f"xmap has no option {sorted(unknown)[0]!r}")
        return XmapFunction(self.fun, self.in_axes, self.out_axes, **{**self._init, **options})

    # -- signature ---------------------------------------------------------------------
    def _signature(self, args, kwargs):
        if kwargs:
            raise TypeError(f"xmap-ed function {self.name!r} takes positional arguments only")
        leaves, in_tree = tree_util.tree_flatten(args)
        for x in leaves:
            if isinstance(x, core.Tracer):
                raise XmapError("xmap cannot be called on traced values (inside jit, grad, vmap or a map); "
                                "call it with concrete arrays")
        avals = tuple(_aval(x, i) for i, x in enumerate(leaves))
        mesh = current_mesh()
        return leaves, (in_tree, avals, mesh)

    def __call__(self, *args, **kwargs):
        leaves, key = self._signature(args, kwargs)
        compiled = self._cache.get(key)
        if compiled is None:
            compiled = self._cache[key] = self._lower(key).compile()
        return compiled.signature.unflatten(compiled.call_flat(leaves))

    def lower(self, *args, **kwargs) -> Lowered:
        _, key = self._signature(args, kwargs)
        return self._lower(key)

    def _lower(self, key) -> Lowered:
        in_tree, avals, mesh = key
        traced = self._trace(in_tree, avals, mesh)
        return lower_traced(traced, mesh, self.options, self.name, self.backend)

    # -- tracing -------------------------------------------------------------------------
    def _trace(self, in_tree, avals, mesh: Mesh | None) -> _Traced:
        STATS["traces"] += 1
        paths = ["args" + tree_util.keystr(p) for p, _ in
                 tree_util.tree_flatten_with_path(tree_util.tree_unflatten(in_tree, list(avals)))[0]]
        entries = _flatten_specs("xmap in_axes", in_tree, _single_arg(self.in_axes, in_tree))
        in_maps = tuple(parse_entry(e, av.ndim, f"in_axes of {p}") for e, av, p in zip(entries, avals, paths))
        mesh_shape = dict(mesh.shape) if mesh is not None else {}
        plan = make_plan(in_maps, [av.shape for av in avals], self.axis_sizes, self.axis_resources, mesh_shape,
                         paths)
        for m, p in zip(in_maps, paths):
            check_resource_clash(plan, set(m.values()), f"the input {p}")
        elem = [core.ShapedArray(tuple(s for d, s in enumerate(av.shape) if d not in m), av.dtype,
                                 weak_type=av.weak_type) for av, m in zip(avals, in_maps)]
        store = {}

        def flat_fun(*xs):
            out = self.fun(*tree_util.tree_unflatten(in_tree, xs))
            flat, store["tree"] = tree_util.tree_flatten(out)
            return flat

        debug = api_util.debug_info("pxla_mlir.xmap", self.fun, tuple(range(len(elem))), {})
        with timed("trace"):
            user = trace_flat(flat_fun, elem, [(n, plan.sizes[n]) for n in plan.names], debug)
        out_tree = store["tree"]
        out_entries = _flatten_specs("xmap out_axes", out_tree, self.out_axes)
        out_maps = tuple(parse_entry(e, out_entry_rank(e, av.ndim), f"out_axes of output {i}")
                         for i, (e, av) in enumerate(zip(out_entries, user.out_avals)))
        self._check_outputs(plan, user, in_maps, out_maps)
        global_out = tuple(_unmapped(av, m, plan) for av, m in zip(user.out_avals, out_maps))
        donate = {n % len(in_tree.children()) for n in self.donate_argnums} if in_tree.children() else set()
        donated = tuple(i in donate for i, child in enumerate(in_tree.children()) for _ in range(child.num_leaves))
        return _Traced(plan, user, in_tree, out_tree, in_maps, out_maps, tuple(avals), global_out, donated)

    def _check_outputs(self, plan: Plan, user, in_maps, out_maps) -> None:
        known = set(plan.names)
        for i, m in enumerate(out_maps):
            unknown = sorted(set(m.values()) - known)
            if unknown:
                raise XmapError(f"out_axes of output {i} names {unknown[0]!r}, which is not a named axis of this "
                                f"xmap (named axes: {', '.join(plan.names) or 'none'})")

        def typecheck(eqn, names):
            check_resource_clash(plan, set(names) & known, lambda: (
                f"a value computed by {eqn.primitive.name} at {source_info_util.summarize(eqn.source_info)}"))

        sets = named_shapes(user.jaxpr, [frozenset(m.values()) for m in in_maps], typecheck)
        for i, (varies, m) in enumerate(zip(sets, out_maps)):
            missing = sorted((varies & known) - set(m.values()))
            if missing:
                raise XmapError(f"output {i} varies along named axis {missing[0]!r}, but out_axes does not place "
                                f"{missing[0]!r} in it; reduce over {missing[0]!r} first (lax.psum, pmean, "
                                f"all_gather, ...) or add it to out_axes")


def _single_arg(in_axes, in_tree):
    # xmap(f, in_axes=['batch', ...]) with one argument means that argument's axes.
    if _is_spec(in_axes) and len(in_tree.children()) == 1:
        return (in_axes,)
    return in_axes


def _aval(x, index: int) -> core.ShapedArray:
    if not (isinstance(x, (np.ndarray, np.generic, jax.Array, bool, int, float, complex))
            or (hasattr(x, "shape") and hasattr(x, "dtype"))):
        raise TypeError(f"xmap argument {index} of type {type(x).__name__} is not an array")
    aval = core.shaped_abstractify(x)
    return core.ShapedArray(aval.shape, aval.dtype, weak_type=aval.weak_type)


def _unmapped(aval, mapping: Mapping[int, str], plan: Plan) -> core.ShapedArray:
    shape = list(aval.shape)
    for d in sorted(mapping):
        shape.insert(d, plan.sizes[mapping[d]])
    return core.ShapedArray(tuple(shape), aval.dtype)


# -- lowering ------------------------------------------------------------------------------

def lower_traced(t: _Traced, mesh: Mesh | None, options: XmapPipeline, name: str, backend) -> Lowered:
    plan = t.plan
    devices = list(mesh.devices.flat) if mesh is not None else jax.local_devices(backend=backend)[:1]
    with timed("import"):
        imported = import_xmap(t, mesh, options.lowering, len(devices), devices[0].platform, name)
    jmesh = JaxMesh(mesh.devices, mesh.axis_names) if mesh is not None else None
    if mesh is None:
        options = dataclasses.replace(options, lowering="vectorize")
    return Lowered(
        imported.module, pipeline=options.anchored(), devices=devices, in_avals=t.global_in,
        out_avals=t.global_out,
        in_shardings=[_sharding(jmesh, plan, m, av.ndim, devices) for m, av in zip(t.in_maps, t.global_in)],
        out_shardings=[_sharding(jmesh, plan, m, av.ndim, devices) for m, av in zip(t.out_maps, t.global_out)],
        signature=Signature(t.in_tree, t.out_tree), keepalive=imported.keepalive, jaxpr_text=t.user.pretty_print,
        plan=plan)


def _sharding(jmesh, plan: Plan, mapping, ndim: int, devices) -> NamedSharding:
    if jmesh is None:
        return jax.sharding.SingleDeviceSharding(devices[0])
    spec = []
    for axes in plan.spec_dims(mapping, ndim):
        spec.append(None if not axes else axes[0] if len(axes) == 1 else tuple(axes))
    return NamedSharding(jmesh, PartitionSpec(*spec))


def xmap(fun: Callable, in_axes, out_axes, *, axis_sizes: Mapping = {}, axis_resources: Mapping = {},
         donate_argnums=(), backend=None, lowering: str = XmapPipeline.lowering,
         shardings: str = XmapPipeline.sharding_dialect) -> XmapFunction:
    """Maps ``fun`` over named axes. ``in_axes``/``out_axes`` name array
    dimensions (``{dim: name}`` or ``['batch', ..., 'feat']``, as pytree
    prefixes); inside ``fun`` those dimensions are gone and collectives refer
    to them by name. ``axis_resources`` spreads named axes over the axes of
    the mesh active in ``with pxla_mlir.Mesh(...)``; the rest are vectorized
    on each device. ``lowering`` picks replica, manual or vectorize (see the
    module docs); ``shardings`` ("sdy": Shardy, or "gspmd") how the manual
    and vectorize lowerings state their layout to XLA."""
    return XmapFunction(fun, in_axes, out_axes, axis_sizes=axis_sizes, axis_resources=axis_resources,
                        donate_argnums=donate_argnums, backend=backend, lowering=lowering, shardings=shardings)
