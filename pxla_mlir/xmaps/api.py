"""``pxla_mlir.xmap``: named axes mapped onto a device mesh (2022 xmap).

    with pxla_mlir.Mesh(devices, ("x", "y")):        # or a jax.sharding.Mesh
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

A call with concrete arguments finds its compiled program by (function,
options, argument avals, mesh, loops) in caches every xmap object made with
that function and those options shares (:class:`pxla_mlir.maps.function.MapFunction`):
a new xmap object around the same function does not trace or compile again. Called on tracers (under
grad, vmap, jit, inside another map) or closing over them, the xmap is bound
as the ``pxla_xmap`` primitive instead (:mod:`.primitive`).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from jax import tree_util
from jax.sharding import NamedSharding

from pxla_mlir.distributed.jit_shares import note_xmap
from pxla_mlir.distributed.processes import is_multi_process, spans_processes
from pxla_mlir.distributed.shares import scaled_avals, share_factor
from pxla_mlir.jaxbridge.jax_internals import api_util, at_top_level, core, pe
from pxla_mlir.jaxbridge.jaxpr_protocols import has_checks
from pxla_mlir.jaxbridge.tracebacks import api_boundary
from pxla_mlir.maps import debug_checks
from pxla_mlir.maps.arguments import argnums
from pxla_mlir.maps.function import MapFunction, Traced
from pxla_mlir.maps.invariance import named_shapes
from pxla_mlir.maps.tracing import trace_flat
from pxla_mlir.mlir.pass_infra.extra_passes import own_passes
from pxla_mlir.mlir.pass_infra.registry import REGISTRY
from pxla_mlir.mlir.pipelines import XmapPipeline, api_options, choices, configure
from pxla_mlir.mlir.sharding.mesh import Mesh
from pxla_mlir.mlir.support.stats import timed
from pxla_mlir.stages.aot import Lowered
from pxla_mlir.stages.signature import Signature
from pxla_mlir.xmaps.call_site import call_site
from pxla_mlir.xmaps.checks import ResourceTyping, check_outputs, show_axes
from pxla_mlir.xmaps.inputs import check_partitioning
from pxla_mlir.xmaps.lower import XmapCall, deoptimized, input_shardings, lower
from pxla_mlir.xmaps.plan import (
    XmapError,
    XmapMeshError,
    XmapTypeError,
    XmapUnsupportedError,
    check_resource_clash,
    make_plan,
    set_repr,
)
from pxla_mlir.xmaps.primitive import bind
from pxla_mlir.xmaps.resources import active_loops, active_mesh, loops_in_scope, mapping_arg, normalize_resources
from pxla_mlir.xmaps.specs import flatten_specs, is_entry, parse_tree, spec_names, tree_key

if TYPE_CHECKING:
    from jax.core import ShapedArray

__all__ = ["xmap", "XmapFunction", "LOWERINGS"]

LOWERINGS = choices(XmapPipeline, "lowering")


class _Enclosing(threading.local):
    def __init__(self):
        self.meshes: list = []  # the mesh of each xmap whose body is being traced


_enclosing = _Enclosing()


@dataclasses.dataclass(frozen=True)
class _Traced(Traced):
    call: XmapCall
    consts: tuple  # values of the leading (hoisted) operands
    in_tree: Any
    out_tree: Any
    cacheable: bool  # False: it closes over tracers of an enclosing transformation


@dataclasses.dataclass(frozen=True)
class _Call:
    """An xmap call: flat positional arguments, their pytree and avals."""

    flat_args: list
    in_tree: Any
    avals: tuple[ShapedArray, ...]

    @property
    def key(self) -> tuple:
        return self.in_tree, self.avals

    @property
    def has_tracers(self) -> bool:
        return any(isinstance(x, core.Tracer) for x in self.flat_args)


class XmapFunction(MapFunction[_Traced]):
    what = "xmap"

    def __init__(self, fun: Callable, in_axes, out_axes, *, axis_sizes: Mapping, axis_resources: Mapping,
                 donate_argnums, backend, options: XmapPipeline, ensure_fixed_sharding: bool = False):
        if not callable(fun):
            raise TypeError(f"Expected a callable value, got {fun}. pxla_mlir.xmap(fun, in_axes, out_axes) maps a "
                            f"function")
        if isinstance(out_axes, tuple) and not out_axes:
            raise XmapError(f"xmapped functions cannot have no return values. The xmap of "
                            f"{getattr(fun, '__name__', fun)!r} has out_axes=(); return at least one array")
        if not isinstance(ensure_fixed_sharding, bool):
            raise TypeError(f"xmap ensure_fixed_sharding must be True or False, got {ensure_fixed_sharding!r}")
        if ensure_fixed_sharding and options.lowering != "vectorize":
            raise XmapUnsupportedError(
                f"This flag requires enabling the experimental_xmap_spmd_lowering flag: ensure_fixed_sharding=True "
                f"constrains the global view XLA's SPMD partitioner splits, which only lowering='vectorize' "
                f"builds (the xmap of {getattr(fun, '__name__', fun)!r} asks for lowering={options.lowering!r}); "
                f"pass lowering='vectorize'")
        self.options, self.ensure_fixed_sharding = options, ensure_fixed_sharding
        self._init = dict(axis_sizes=axis_sizes, axis_resources=axis_resources, donate_argnums=donate_argnums,
                          backend=backend, ensure_fixed_sharding=ensure_fixed_sharding)
        if isinstance(in_axes, list) and not is_entry(in_axes):
            in_axes = tuple(in_axes)  # a list of per-argument entries is the argument tuple (as 2022)
        self.fun, self.in_axes, self.out_axes = fun, in_axes, out_axes
        self._in_specs, self._out_specs = parse_tree(in_axes, "in_axes"), parse_tree(out_axes, "out_axes")
        axis_sizes = mapping_arg(axis_sizes, "axis_sizes", fun)
        axis_resources = mapping_arg(axis_resources, "axis_resources", fun)
        for n, size in axis_sizes.items():
            if not isinstance(size, (int, np.integer)) or size < 0:
                raise XmapError(f"axis_sizes gives {n!r} size {size!r}; sizes must be non-negative integers")
        self.axis_sizes = {n: int(s) for n, s in axis_sizes.items()}
        self.axis_resources = axis_resources
        self._resources, self._anonymous_loops = normalize_resources(axis_resources)
        self._own_loops = tuple(sorted(self._anonymous_loops.items()))
        self._top_env = (None, self._own_loops)  # the environment of the latest top-level call (see _environment)
        declared = spec_names(self._in_specs)
        defined = set(declared) | set(self.axis_sizes)
        missing = set(self._resources) - defined
        if missing:
            raise XmapError(f"All axes that were assigned resources have to appear in in_axes or axis_sizes, but "
                            f"the following are missing: {set_repr(missing)}. axis_resources maps "
                            f"{sorted(missing, key=str)[0]!r}, which no in_axes entry names: name it there, or give "
                            f"its size in axis_sizes")
        missing = set(spec_names(self._out_specs)) - defined
        if missing:
            raise XmapError(f"All axis names appearing in out_axes must also appear in in_axes or axis_sizes, but "
                            f"the following are missing: {set_repr(missing)}. out_axes names "
                            f"{sorted(missing, key=str)[0]!r}, whose size no input gives: name it in in_axes, or "
                            f"give its size in axis_sizes")
        self._declared = tuple(declared)
        donate = argnums(donate_argnums, "xmap donate_argnums")
        self.backend, self.lowering = backend, options.lowering
        shared = (tree_key(self._in_specs), tree_key(self._out_specs), tuple(sorted(self.axis_sizes.items())),
                  tuple(sorted(self._resources.items())), tuple(sorted(self._anonymous_loops.items())), donate, backend,
                  self.options, ensure_fixed_sharding)
        super().__init__(fun, donate_argnums=donate, options=shared)
        if own_passes(options):  # (an xmap without passes of its own keeps the plain, fastest one)
            self._environment = self._versioned_environment

    def with_options(self, **options) -> XmapFunction:
        """The same xmap with other options (e.g. ``lowering``, ``shardings``)."""
        unknown = set(options) - {*self._init, *_PIPELINE_OPTIONS}
        if unknown:
            raise TypeError(f"xmap has no option {sorted(unknown)[0]!r}")
        pipeline = {k: options.pop(k) for k in list(options) if k in _PIPELINE_OPTIONS}
        return XmapFunction(self.fun, self.in_axes, self.out_axes, **{**self._init, **options},
                            options=configure(self.options, **pipeline))

    def __get__(self, obj, objtype=None):
        """As in 2022, an xmap stored on a class is not bound to instances (it takes no ``self``)."""
        return self

    # -- the front end's hooks (see maps.function) -------------------------------------------
    def _versioned_environment(self) -> tuple:
        """The environment of an xmap with passes of its own (see __init__): the scope and the registry's
        generation, so that a pass registered again (another version) resolves and lowers anew."""
        return (*XmapFunction._environment(self), REGISTRY.generation)

    def _environment(self) -> tuple:
        """The mesh and the serial loops in scope."""
        if at_top_level() and not (_enclosing.meshes or loops_in_scope()):  # no trace, no axis bound
            # A top-level call (every cached call of a loop): nothing to check. The same mesh gives the same
            # tuple, so the program lookup matches it by identity (hashing a mesh is a Python call).
            mesh, env = active_mesh(), self._top_env
            if env[0] is not mesh:
                env = self._top_env = (mesh, self._own_loops)
            return env
        mesh = active_mesh()
        if _enclosing.meshes and mesh != _enclosing.meshes[-1]:
            raise XmapMeshError(f"Changing the physical mesh is not allowed inside xmap. xmap {self.name!r} is called "
                                f"under mesh {mesh!r} inside an xmap running on {_enclosing.meshes[-1]!r}; call "
                                f"it outside the `with` block of the new mesh")
        bound = set(core.get_axis_env().axis_sizes)
        shadowed = sorted((set(self._declared) | set(self.axis_sizes)) & bound, key=str)
        if shadowed:
            raise XmapTypeError(f"Detected disallowed xmap axis name shadowing at {call_site()} (shadowed axes: "
                                f"{show_axes(shadowed)}). xmap {self.name!r} names axis {shadowed[0]!r}, which an "
                                f"enclosing map already binds; rename one of them")
        scope = active_loops()
        wanted = {r for rs in self._resources.values() for r in rs}
        loops = {**{k: v for k, v in scope.items() if k in wanted}, **self._anonymous_loops}
        return mesh, tuple(sorted(loops.items()))

    def _examine(self, args, kwargs) -> _Call:
        if kwargs:
            raise TypeError(f"xmap-ed function {self.name!r} takes positional arguments only")
        leaves, in_tree = tree_util.tree_flatten(args)
        avals = tuple(_aval(x, i) for i, x in enumerate(leaves))
        if is_multi_process():
            avals = self._global_avals(leaves, in_tree, avals)
        return _Call(leaves, in_tree, avals)

    def _global_avals(self, leaves, in_tree, avals) -> tuple:
        """Multi-process: a host input is this process's share of every named
        dimension whose mesh axes span processes (pmap's rule, per dimension)."""
        mesh = active_mesh()
        if mesh is None or not spans_processes(list(mesh.devices.flat)):
            return avals  # no mesh, or a per-process one: host inputs are whole
        try:
            specs = flatten_specs("xmap in_axes", in_tree, self._in_specs)
            maps = [s.resolve(av.ndim, str(i), shape=av.shape) for i, (s, av) in enumerate(zip(specs, avals))]
        except (ValueError, TypeError):
            return avals  # the trace raises it, with its words
        note_xmap(leaves, maps, self._resources, mesh, self.name)  # a probed pxla_mlir.jit body
        names = mesh.axis_names
        factors = [{d: share_factor(mesh.devices, names, [r for r in self._resources.get(n, ()) if r in names])
                    for d, n in m.items()} for m in maps]
        return tuple(scaled_avals(leaves, avals, factors, lambda i: f"leaf {i}", "xmap"))

    def _resolve(self, env, args, kwargs):
        """The Python path of a call: arrays laid out on a mesh must be split as
        this xmap maps them (:mod:`.inputs`), then the shared path runs."""
        if not kwargs and any(isinstance(getattr(x, "sharding", None), NamedSharding)
                              for x in tree_util.tree_leaves(args)):
            call = self._examine(args, kwargs)
            if not self._staged(call):
                with self._cache.lock:  # traced once, also from many threads
                    traced = self._traced(call, env, self._key(call, env))
                expected = input_shardings(traced.call)
                if expected is not None:
                    check_partitioning(self.name, args, call.flat_args, expected[len(traced.consts):])
        return super()._resolve(env, args, kwargs)

    def _staged(self, call: _Call) -> bool:
        # With concrete arguments an xmap runs, even inside a transformation; unless its body holds
        # checkify.checks, which only the enclosing checkify.checkify can discharge.
        if call.has_tracers:
            return True
        if core.trace_state_clean():
            return False
        env = self._environment()
        return has_checks(self._traced(call, env, self._key(call, env)).call.jaxpr)

    def _bind(self, traced: _Traced, call: _Call):
        outs = bind(traced.call.jaxpr, [*traced.consts, *call.flat_args], traced.call.params())
        return tree_util.tree_unflatten(traced.out_tree, outs)

    def _lower_traced(self, traced: _Traced, call: _Call, env) -> Lowered:
        return lower(traced.call, signature=Signature(traced.in_tree, traced.out_tree), consts=traced.consts)

    def _deoptimized(self, traced: _Traced, call: _Call, env):
        return deoptimized(traced.call, [*traced.consts, *call.flat_args])

    def _lower_call(self, args: tuple, kwargs: dict) -> Lowered:
        call = self._examine(args, kwargs)
        if call.has_tracers:
            raise XmapError(f"xmap {self.name!r}.lower() was given traced values; lower with concrete arrays or "
                            f"jax.ShapeDtypeStruct")
        env = self._environment()
        if not self._traced(call, env, self._key(call, env)).cacheable:
            raise XmapError(f"xmap {self.name!r} closes over traced values of an enclosing transformation; it "
                            f"can only be lowered on its own when its function closes over concrete values")
        return super()._lower_call(args, kwargs)

    # -- tracing -------------------------------------------------------------------------
    def _trace(self, call: _Call, env) -> _Traced:
        mesh, loops = env[:2]
        return self._trace_body(call.in_tree, call.avals, mesh, dict(loops))

    def _trace_body(self, in_tree, avals, mesh: Mesh | None, loops: dict) -> _Traced:
        paths = ["args" + tree_util.keystr(p) for p, _ in
                 tree_util.tree_flatten_with_path(tree_util.tree_unflatten(in_tree, list(avals)))[0]]
        specs = flatten_specs("xmap in_axes", in_tree, self._in_specs)
        in_maps = tuple(s.resolve(av.ndim, p, shape=av.shape) for s, av, p in zip(specs, avals, paths))
        mesh_shape = dict(mesh.shape) if mesh is not None else {}
        plan = make_plan(in_maps, [av.shape for av in avals], self.axis_sizes, self._resources, mesh_shape, paths,
                         loops, declared=self._declared)
        for m, p in zip(in_maps, paths):
            check_resource_clash(plan.resources, set(m.values()),
                                 f"an input to an xmapped function {self.name} (the argument {p})", plan.loops)
        elem = [core.ShapedArray(tuple(s for d, s in enumerate(av.shape) if d not in m), av.dtype,
                                 weak_type=av.weak_type) for av, m in zip(avals, in_maps)]
        store = {}

        def flat_fun(*xs):
            out = self.fun(*tree_util.tree_unflatten(in_tree, xs))
            flat, store["tree"] = tree_util.tree_flatten(out)
            return flat

        env = [(n, plan.sizes[n]) for n in plan.names]
        debug = api_util.debug_info("pxla_mlir.xmap", self.fun, tuple(range(len(elem))), {})
        _enclosing.meshes.append(mesh)
        try:
            with timed("trace"):
                user = trace_flat(flat_fun, elem, env, debug, binder="xmap")
        finally:
            _enclosing.meshes.pop()
        out_tree = store["tree"]
        out_paths = [tree_util.keystr(p) or "0" for p, _ in tree_util.tree_flatten_with_path(
            tree_util.tree_unflatten(out_tree, list(user.out_avals)))[0]]
        out_specs = flatten_specs("xmap out_axes", out_tree, self._out_specs)
        out_maps = tuple(s.resolve_result(av, plan.sizes, p) for s, av, p in zip(out_specs, user.out_avals, out_paths))
        varies = named_shapes(user.jaxpr, [frozenset(m.values()) for m in in_maps],
                              ResourceTyping(plan.resources, plan.loops))
        check_outputs(plan.resources, plan.loops, varies, out_maps, out_paths, self.name)
        return self._hoisted(plan, user, in_tree, out_tree, in_maps, out_maps, avals, mesh)

    def _hoisted(self, plan, user, in_tree, out_tree, in_maps, out_maps, avals, mesh) -> _Traced:
        """Constants of the body become leading broadcast operands."""
        consts = tuple(user.consts)
        with core.extend_axis_env_nd([(n, plan.sizes[n]) for n in plan.names]):
            jaxpr = core.ClosedJaxpr(pe.convert_constvars_jaxpr(user.jaxpr), ())
        children = in_tree.children()
        nargs = len(children)
        donate = {n % nargs for n in self.donate_argnums if -nargs <= n < nargs}  # others ignored, as jax does
        if not debug_checks.donation_allowed():  # jax_debug_nans: the inputs are needed again
            donate = set()
        donated = tuple(i in donate for i, child in enumerate(children) for _ in range(child.num_leaves))
        const_avals = tuple(_aval(c, i) for i, c in enumerate(consts))
        call = XmapCall(plan, jaxpr, ({},) * len(consts) + in_maps, out_maps, const_avals + tuple(avals),
                        tuple(_unmapped(av, m, plan) for av, m in zip(user.out_avals, out_maps)),
                        (False,) * len(consts) + donated, mesh, self.options, self.name, self.backend,
                        self.ensure_fixed_sharding)
        return _Traced(call, consts, in_tree, out_tree, not any(isinstance(c, core.Tracer) for c in consts))


def _aval(x, index: int) -> ShapedArray:
    if isinstance(x, core.Tracer):
        aval = x.aval
    elif isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)) or hasattr(x, "__jax_array__") \
            or (hasattr(x, "shape") and hasattr(x, "dtype")):
        aval = core.shaped_abstractify(x)
    else:
        raise TypeError(f"Argument '{x}' of type {type(x)} is not a valid JAX type. It is leaf {index} of the "
                        f"xmap's arguments; pass arrays, scalars or pytrees of them")
    return core.ShapedArray(aval.shape, aval.dtype, weak_type=aval.weak_type)


def _unmapped(aval, mapping: Mapping[int, str], plan) -> ShapedArray:
    shape = list(aval.shape)
    for d in sorted(mapping):
        shape.insert(d, plan.sizes[mapping[d]])
    return core.ShapedArray(tuple(shape), aval.dtype, weak_type=aval.weak_type)


@api_boundary
def xmap(fun: Callable, in_axes, out_axes, *, axis_sizes: Mapping = {}, axis_resources: Mapping = {},
         donate_argnums: int | Sequence[int] = (), backend: str | None = None, lowering: str = "replica",
         shardings: str = "sdy", ensure_fixed_sharding: bool = False,
         extra_passes: str | Mapping[str, str] | None = None) -> XmapFunction:
    """Maps ``fun`` over named axes. ``in_axes``/``out_axes`` name array
    dimensions (``{dim: name}`` or ``['batch', ..., 'feat']``, as pytree
    prefixes); inside ``fun`` those dimensions are gone and collectives refer
    to them by name. ``axis_resources`` spreads named axes over the axes of
    the current mesh (``with pxla_mlir.Mesh(...)`` or a jax mesh) and serial
    loops (``serial_loop``, ``SerialLoop``); the rest are vectorized on each
    device. ``lowering`` picks replica, manual or vectorize (the [user
    guide](guide.md#xmap) compares them); ``ensure_fixed_sharding`` (with ``lowering="vectorize"``, 2022's
    ``experimental_xmap_ensure_fixed_sharding``) constrains every
    intermediate of the global view to the layout of its named axes, so
    XLA's partitioner keeps them split as the xmap maps them. xmap composes
    with jax transformations and nests. ``extra_passes`` runs passes of your
    own in its pipeline, as pmap's does (pipeline text, run on the final MHLO
    before ``pxla-verify-handoff``, or ``{"pxla": text, "mhlo": text}``)."""
    return XmapFunction(fun, in_axes, out_axes, axis_sizes=axis_sizes, axis_resources=axis_resources,
                        donate_argnums=donate_argnums, backend=backend,
                        options=configure(XmapPipeline, lowering=lowering, shardings=shardings,
                                          extra_passes=extra_passes),
                        ensure_fixed_sharding=ensure_fixed_sharding)


#: xmap's pipeline options, by their API names (lowering, shardings, extra_passes).
_PIPELINE_OPTIONS = tuple(api_options(XmapPipeline))
