"""``pxla_mlir.jit`` of a function holding xmaps: one program over their mesh.

The function is lowered as an xmap without named axes (every argument and
result broadcast) on the mesh its xmaps use, so code outside the xmaps runs
replicated on every mesh device and each xmap tiles its operands over its
mesh axes and gathers its results back, in the same module (as 2022's jit
of xmap did). All xmaps of the function share one mesh and one lowering; a
function with both pmaps and xmaps is refused (their device layouts differ).
"""

from __future__ import annotations

from ..jax_internals import core, pe
from ..stages import Lowered, Signature
from .lower import XmapCall, lower
from .plan import Plan, XmapError
from .primitive import plan_of, pxla_xmap_p

__all__ = ["lower_in_jit"]


def _maps(jaxpr, found: list) -> list:
    jaxpr = jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr
    for eqn in jaxpr.eqns:
        if eqn.primitive is pxla_xmap_p or eqn.primitive.name == "pxla_pmap":
            found.append(eqn)
        for sub in core.jaxprs_in_params(eqn.params):
            _maps(sub, found)
    return found


def lower_in_jit(jaxpr: core.ClosedJaxpr, *, name: str, global_avals, donated, signature: Signature, devices,
                 backend) -> Lowered | None:
    """The Lowered of a pxla_mlir.jit whose body holds xmaps; None if it holds none."""
    maps = _maps(jaxpr, [])
    xmaps = [e for e in maps if e.primitive is pxla_xmap_p]
    if not xmaps:
        return None
    if len(xmaps) != len(maps):
        raise XmapError(f"pxla_mlir.jit function {name!r} holds both pmaps and xmaps, which cannot share one "
                        f"program (a pmap lays its devices out by its axis, an xmap by its mesh); jit them "
                        f"separately")
    if devices is not None:
        raise XmapError(f"pxla_mlir.jit function {name!r} holds xmaps, whose devices are their mesh's; drop devices=")
    meshes = {e.params["mesh"] for e in xmaps if plan_of(e.params).uses_mesh} or {xmaps[0].params["mesh"]}
    lowerings = {e.params["options"] for e in xmaps}
    if len(meshes) > 1:
        raise XmapError(f"the xmaps of pxla_mlir.jit function {name!r} use different meshes: "
                        f"{', '.join(sorted(map(repr, meshes)))}; one program runs on one mesh")
    if len(lowerings) > 1:
        raise XmapError(f"the xmaps of pxla_mlir.jit function {name!r} ask for different lowerings "
                        f"({', '.join(sorted(map(str, lowerings)))}); give them the same lowering= and shardings=")
    (mesh,), (options,) = meshes, lowerings
    consts = tuple(jaxpr.consts)
    body = core.ClosedJaxpr(pe.convert_constvars_jaxpr(jaxpr.jaxpr), ())
    in_avals = tuple(core.shaped_abstractify(c) for c in consts) + tuple(global_avals)
    plan = Plan((), {}, {}, dict(mesh.shape) if mesh is not None else {}, {})
    call = XmapCall(plan, body, ({},) * len(in_avals), ({},) * len(jaxpr.out_avals), in_avals,
                    tuple(jaxpr.out_avals), (False,) * len(consts) + tuple(donated), mesh, options, name, backend)
    return lower(call, signature=signature, consts=consts)
