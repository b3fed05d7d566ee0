"""From an xmap call (traced by :mod:`.api` or bound as the primitive) to a
``Lowered``, the primitive's impl (an xmap bound with concrete arguments
lowers, compiles once and runs), and ``pxla_mlir.jit`` of a function
holding xmaps (:func:`lower_jit_body`).

An xmap whose named axes (and those of xmaps nested in it) use no mesh axis
runs on one device (the mesh's first, as 2022's xmap did); a mesh of zero
dimensions is such a mesh.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, overload

import jax
from jax.sharding import Mesh as JaxMesh, NamedSharding, PartitionSpec

from pxla_mlir.distributed.processes import check_devices, is_multi_process
from pxla_mlir.jaxbridge import jaxpr_fingerprint
from pxla_mlir.jaxbridge.jax_internals import core, pe
from pxla_mlir.maps import debug_checks
from pxla_mlir.maps.arguments import check_backend
from pxla_mlir.maps.impl import ImplCache, plain_avals
from pxla_mlir.maps.kind import JitBody
from pxla_mlir.mlir.pipelines import XmapPipeline
from pxla_mlir.mlir.sharding.mesh import Mesh
from pxla_mlir.mlir.support.stats import timed
from pxla_mlir.stages.aot import Lowered
from pxla_mlir.stages.lowering import Layout
from pxla_mlir.stages.map_lowering import lower_cached
from pxla_mlir.stages.signature import Signature
from pxla_mlir.xmaps.body_programs import global_function
from pxla_mlir.xmaps.importer import import_xmap, mesh_labels
from pxla_mlir.xmaps.plan import Plan, XmapError
from pxla_mlir.xmaps.primitive import XmapParams, abstract_eval, mapping_of, plan_of, pxla_xmap_p, spec_of
from pxla_mlir.xmaps.specs import NamedDims
from pxla_mlir.xmaps.tiles import place_tiles

if TYPE_CHECKING:
    from jax.core import ShapedArray
    from jax.extend.core import ClosedJaxpr

    from pxla_mlir.runtime.executable import Device

__all__ = ["XmapCall", "XmapInputs", "input_shardings", "lower", "lower_jit_body", "register_impl", "uses_mesh"]


# What decides a lowering in our own types, for the lowering cache's key: the dims a value maps (its text
# as the user wrote it is for messages) and a mesh's axes and devices.
jaxpr_fingerprint.encode_as(NamedDims, dict)
jaxpr_fingerprint.encode_as(Mesh, lambda m: (tuple(m.axis_names), m.devices.shape, tuple(m.devices.flat)))


@dataclasses.dataclass(frozen=True)
class XmapCall:
    """Everything a lowering needs. Operands are flat; hoisted constants are
    ordinary leading operands (broadcast, ``{}``)."""

    plan: Plan
    jaxpr: ClosedJaxpr  # the per-element body, without consts
    in_maps: tuple[dict[int, str], ...]  # per operand: {dim: name}
    out_maps: tuple[dict[int, str], ...]  # per result
    global_in: tuple[ShapedArray, ...]
    global_out: tuple[ShapedArray, ...]
    donated: tuple[bool, ...]
    mesh: Mesh | None
    options: XmapPipeline  # lowering and sharding dialect
    name: str
    backend: str | None = None
    fixed_sharding: bool = False  # ensure_fixed_sharding (vectorize): every intermediate constrained

    def params(self) -> XmapParams:
        plan = self.plan
        return XmapParams(in_axes=tuple(spec_of(m) for m in self.in_maps),
                          out_axes=tuple(spec_of(m) for m in self.out_maps),
                          axis_sizes=tuple((n, plan.sizes[n]) for n in plan.names),
                          axis_resources=tuple((n, tuple(plan.resources[n])) for n in plan.names),
                          loops=tuple(plan.loops.items()), mesh=self.mesh, options=self.options, name=self.name,
                          donated=tuple(self.donated), backend=self.backend, fixed_sharding=self.fixed_sharding)

    @classmethod
    def from_params(cls, jaxpr: ClosedJaxpr, params: dict, avals) -> XmapCall:
        return cls(plan_of(params), jaxpr, tuple(mapping_of(s) for s in params["in_axes"]),
                   tuple(mapping_of(s) for s in params["out_axes"]), tuple(avals),
                   tuple(abstract_eval(jaxpr=jaxpr, **params)[0]), tuple(params["donated"]), params["mesh"],
                   params["options"], params["name"], params["backend"], params["fixed_sharding"])


def uses_mesh(jaxpr) -> bool:
    """Does an xmap nested (at any depth) in ``jaxpr`` use a mesh axis?"""
    jaxpr = jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr
    for eqn in jaxpr.eqns:
        if eqn.primitive is pxla_xmap_p and plan_of(eqn.params).uses_mesh:
            return True
        if any(uses_mesh(sub) for sub in core.jaxprs_in_params(eqn.params)):
            return True
    return False


def _spread_mesh(call: XmapCall) -> Mesh | None:
    """The mesh the program runs on, or None when no xmap in it uses a mesh axis (one device)."""
    spread = call.mesh is not None and call.mesh.axis_names and (call.plan.uses_mesh or uses_mesh(call.jaxpr))
    return call.mesh if spread else None


def input_shardings(call: XmapCall) -> list[NamedSharding] | None:
    """The layout each flat operand must have (None: the program runs on one device)."""
    mesh = _spread_mesh(call)
    if mesh is None:
        return None
    jmesh = JaxMesh(mesh.devices, mesh.axis_names)
    return [value_sharding(jmesh, call.plan, m, av.ndim, None) for m, av in zip(call.in_maps, call.global_in)]


@dataclasses.dataclass(frozen=True)
class XmapInputs:
    """What decides an xmap's lowering (a :class:`~pxla_mlir.stages.map_lowering.LoweringInputs`): the call,
    the devices it runs on, the pipeline (vectorize where no mesh axis is used) and whether arguments enter
    as their tiles. The lowering cache's key is a digest of every field; the module is built from them alone."""

    call: XmapCall
    devices: tuple[Device, ...]
    pipeline: XmapPipeline
    tiles: bool  # arguments each device only slices its tile out of enter as that tile (.tiles)

    @property
    def platform(self) -> str:
        return self.devices[0].platform

    @property
    def cacheable(self) -> bool:
        # Placing tiles rewrites the pxla form and decides the input layout from it: such lowerings are not cached.
        return not self.tiles

    @property
    def mesh(self) -> Mesh | None:
        return _spread_mesh(self.call)

    def build(self):
        call, mesh = self.call, self.mesh
        with timed("import"):
            imported = import_xmap(call, mesh, call.options.lowering, len(self.devices), self.platform, call.name)
        placed: dict = {}
        if self.tiles and mesh is not None:
            placed = place_tiles(imported.module, mesh_labels(dict(mesh.shape)), _jax_mesh(mesh),
                                 [av.ndim for av in call.global_in])
        return imported, placed

    def layout(self, hints, pxla, consts: tuple) -> Layout:
        """The input layout is import's (tiles placed: ``hints``) or the plan's."""
        call, jmesh, devices = self.call, _jax_mesh(self.mesh), self.devices
        placed = hints or {}
        return Layout(devices, call.global_in, call.global_out,
                      [placed.get(i) or value_sharding(jmesh, call.plan, m, av.ndim, devices)
                       for i, (m, av) in enumerate(zip(call.in_maps, call.global_in))],
                      [value_sharding(jmesh, call.plan, m, av.ndim, devices)
                       for m, av in zip(call.out_maps, call.global_out)],
                      call.donated, consts)

    def jaxpr_text(self) -> str:
        return self.call.jaxpr.pretty_print()


def _jax_mesh(mesh: Mesh | None) -> JaxMesh | None:
    return JaxMesh(mesh.devices, mesh.axis_names) if mesh is not None else None


def lower(call: XmapCall, *, signature: Signature, consts=(), by_tile: bool = False) -> Lowered:
    """``consts``: values of the leading ``len(consts)`` operands, supplied by
    the ``Compiled`` itself. ``by_tile``: arguments each device only slices its
    tile out of enter as that tile (:mod:`.tiles`)."""
    mesh = _spread_mesh(call)
    if mesh is not None:
        devices = list(mesh.devices.flat)
        check_devices(devices, f"xmap {call.name!r} (its mesh)")  # multi-process: every process, evenly
    elif call.mesh is not None:
        devices = [call.mesh.devices.flat[0]]
    else:
        devices = jax.local_devices(backend=call.backend)[:1]
    check_backend(devices, call.backend, f"xmap {call.name!r} (its mesh)")
    options = call.options if mesh is not None else dataclasses.replace(call.options, lowering="vectorize")
    tiles = by_tile and mesh is not None and options.lowering != "vectorize" and not is_multi_process()
    return lower_cached(XmapInputs(call, tuple(devices), options, tiles), signature=signature, consts=consts,
                        plan=call.plan)


@overload
def value_sharding(jmesh: JaxMesh, plan: Plan, mapping, ndim: int, devices) -> NamedSharding: ...
@overload
def value_sharding(jmesh: JaxMesh | None, plan: Plan, mapping, ndim: int, devices) -> jax.sharding.Sharding: ...
def value_sharding(jmesh: JaxMesh | None, plan: Plan, mapping, ndim: int, devices) -> jax.sharding.Sharding:
    """Where a value with named dims ``mapping`` lives on ``jmesh`` (without a mesh: on one device)."""
    if jmesh is None:
        return jax.sharding.SingleDeviceSharding(devices[0])
    spec = []
    for axes in plan.spec_dims(mapping, ndim):
        spec.append(None if not axes else axes[0] if len(axes) == 1 else tuple(axes))
    return NamedSharding(jmesh, PartitionSpec(*spec))


def lower_jit_body(jaxpr: ClosedJaxpr, xmaps: list, jit: JitBody) -> Lowered:
    """The Lowered of a pxla_mlir.jit whose body holds ``xmaps`` (equations):
    the body as an xmap without named axes (every argument and result
    broadcast) on the mesh its xmaps use, so code outside the xmaps runs
    replicated on every mesh device and each xmap tiles its operands over
    its mesh axes and gathers its results back, in the same module (as
    2022's jit of xmap did). All xmaps share one mesh and one lowering."""
    name, global_avals, donated, backend = jit.name, jit.global_avals, jit.donated, jit.backend
    if jit.devices is not None:
        raise XmapError(f"pxla_mlir.jit function {name!r} holds xmaps, whose devices are their mesh's; drop devices=")
    meshes = {e.params["mesh"] for e in xmaps if plan_of(e.params).uses_mesh} or {xmaps[0].params["mesh"]}
    lowerings = {(e.params["options"], e.params["fixed_sharding"]) for e in xmaps}
    if len(meshes) > 1:
        raise XmapError(f"the xmaps of pxla_mlir.jit function {name!r} use different meshes: "
                        f"{', '.join(sorted(map(repr, meshes)))}; one program runs on one mesh")
    if len(lowerings) > 1:
        shown = sorted(f"{o}" + (" ensure_fixed_sharding" if f else "") for o, f in lowerings)
        raise XmapError(f"the xmaps of pxla_mlir.jit function {name!r} ask for different lowerings "
                        f"({', '.join(shown)}); give them the same lowering=, shardings= and ensure_fixed_sharding=")
    (mesh,), ((options, fixed),) = meshes, lowerings
    if "pxla_passes" in jit.options or "mhlo_passes" in jit.options:  # the jit's own passes run in its one
        # program (its xmaps' own do not)
        options = dataclasses.replace(options, pxla_passes=jit.options.get("pxla_passes", ""),
                                      mhlo_passes=jit.options.get("mhlo_passes", ""))
    consts = tuple(jaxpr.consts)
    body = core.ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr.jaxpr), ())
    in_avals = tuple(core.shaped_abstractify(c) for c in consts) + tuple(global_avals)
    plan = Plan((), {}, {}, dict(mesh.shape) if mesh is not None else {}, {})
    call = XmapCall(plan, body, ({},) * len(in_avals), ({},) * len(jaxpr.out_avals), in_avals,
                    tuple(jaxpr.out_avals), (False,) * len(consts) + tuple(donated), mesh, options, name, backend,
                    fixed)
    return lower(call, signature=jit.signature, consts=consts, by_tile=True)


# -- the primitive's impl: an xmap bound with concrete arguments --------------------------------

_impl_cache = ImplCache(256)


def _impl(*args, jaxpr, **params):
    avals = _global_avals(plain_avals(args), params)

    def build():
        call = XmapCall.from_params(jaxpr, params, avals)
        return lower(call, signature=Signature.flat(len(avals), len(call.out_maps))).compile()

    compiled = _impl_cache.compiled(jaxpr, (tuple(params.items()), avals), build)
    outs = compiled.call_flat(args)
    if debug_checks.active():
        debug_checks.check_outputs(outs, what=f"xmap {params['name']!r}", devices=compiled.executable.devices,
                                   rerun=lambda: deoptimized(XmapCall.from_params(jaxpr, params, avals), args))
    return outs


def _global_avals(avals, params) -> tuple:
    """Multi-process: a bound xmap's host operand may be this process's share
    of its named dimensions (as the front end took it); their sizes are the plan's."""
    if not is_multi_process():
        return avals
    sizes = plan_of(params).sizes
    out = []
    for av, spec in zip(avals, params["in_axes"]):
        shape = list(av.shape)
        for d, n in mapping_of(spec).items():
            if 0 < shape[d] < sizes[n] and sizes[n] % shape[d] == 0:
                shape[d] = sizes[n]
        out.append(core.ShapedArray(tuple(shape), av.dtype, weak_type=av.weak_type))
    return tuple(out)


def deoptimized(call: XmapCall, args):
    """An xmap's body run un-jitted, as its global view (jax.vmap over its named axes; jax_debug_nans)."""
    return global_function(call.plan.without_resources(), call.jaxpr, call.in_maps, call.out_maps)(*args)


def register_impl() -> None:
    pxla_xmap_p.def_impl(_impl)
