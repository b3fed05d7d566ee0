"""The two programs an xmap body becomes, and a nested xmap inside them.

* the *global view* (SPMD vectorize): every named axis is a ``jax.vmap`` at
  its full size under its own name, over global arrays; with serial loops,
  the tile program vmapped over the mesh axes instead (2022's
  ``vtile_by_mesh``), so each device's part still loops over its chunks;
* the *tile* (SPMD manual and replica mode): what one device runs on its
  tiles: ``jax.vmap`` over the local part of each named axis (a named axis
  with serial loops: over its chunk, with the loops inside, see
  :mod:`.loops`), collectives re-bound over mesh axes (see
  :mod:`.interpreter`), traced under an axis environment of the mesh axes;
* a nested xmap (an equation of an enclosing body): in the global view, its
  own global view, its operands and results constrained to the layout it
  maps them to (:mod:`.constraints`); in the tile program, its operands are tiled over its mesh
  axes (a dynamic slice at the device's index), its tile program runs, and
  its results are gathered back (an all_gather over those mesh axes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from jax import lax

from pxla_mlir.xmaps import rewrites
from pxla_mlir.xmaps.constraints import constrain
from pxla_mlir.xmaps.interpreter import Substitution, interpret, register_nested
from pxla_mlir.xmaps.loops import looped_body
from pxla_mlir.xmaps.plan import Plan
from pxla_mlir.xmaps.primitive import mapping_of, plan_of

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr

Maps = Sequence[Mapping[int, str]]  # per value: {dimension: named axis}


def nested_vmap(f: Callable, names: Sequence[str], in_maps: Maps, out_maps: Maps, sizes: Mapping[str, int],
                vmap_name: Callable[[str], str | None]) -> Callable:
    """``f`` vmapped over ``names`` (outermost first); the named dimensions
    are taken from, and land at, exactly the dimensions the maps give."""

    def level(maps: Maps, k: int) -> tuple:
        axes = []
        for m in maps:
            dim = next((d for d, n in m.items() if n == names[k]), None)
            if dim is None:
                axes.append(None)
                continue
            outer = [d for d, n in m.items() if n in names[:k]]
            axes.append(dim - sum(1 for d in outer if d < dim))
        return tuple(axes)

    g = f
    for k in reversed(range(len(names))):
        g = jax.vmap(g, in_axes=level(in_maps, k), out_axes=level(out_maps, k), axis_name=vmap_name(names[k]),
                     axis_size=sizes[names[k]])
    return g


def _as_tuple(f: Callable) -> Callable:
    return lambda *a: tuple(f(*a))


def _input_names(in_maps: Maps) -> list:
    """The named axes each input varies over: those it is mapped along."""
    return [frozenset(m.values()) for m in in_maps]


def _ranks(user: ClosedJaxpr, in_maps: Maps, out_maps: Maps) -> tuple[list[int], list[int]]:
    return ([av.ndim + len(m) for av, m in zip(user.in_avals, in_maps)],
            [av.ndim + len(m) for av, m in zip(user.out_avals, out_maps)])


def global_function(plan: Plan, user: ClosedJaxpr, in_maps: Maps, out_maps: Maps,
                    parent: Substitution | None = None, fixed: bool = False) -> Callable:
    """``fixed``: every intermediate constrained to its layout (``ensure_fixed_sharding``)."""
    if plan.used_loops:
        tile = tile_function(plan, user, in_maps, out_maps, parent, mesh_vmapped=True)
        return _vtile_by_mesh(plan, tile, in_maps, out_maps, *_ranks(user, in_maps, out_maps))
    sub = Substitution(plan, global_view=True, parent=parent, fixed=fixed)
    names = _input_names(in_maps)
    body = _as_tuple(lambda *a: interpret(sub, user.jaxpr, user.consts, *a, names=names))
    return nested_vmap(body, plan.names, in_maps, out_maps, plan.sizes, lambda n: n)


# -- the tile program -----------------------------------------------------------------------------

def _tags(plan: Plan, mapping: Mapping[int, str], ndim: int) -> list:
    """What each dimension of a tile becomes inside the local vmaps: kept
    (None), a loop dim ("loop", n), a local vmap dim ("local", n) or a
    squeezed unit dim ("squeeze", n); a looped axis with a chunk > 1 is split
    into a loop dim and a local dim."""
    tags: list = []
    for d in range(ndim):
        n = mapping.get(d)
        if n is None:
            tags.append(None)
            continue
        if plan.loop_count(n) > 1:
            tags.append(("loop", n))
        if plan.local(n):
            tags.append(("local", n))
        elif plan.loop_count(n) == 1:
            tags.append(("squeeze", n))
    return tags


def _kept(tags: list) -> list:
    return [t for t in tags if not (t and t[0] == "squeeze")]


def _vmap_map(tags: list) -> dict:
    return {i: t[1] for i, t in enumerate(_kept(tags)) if t and t[0] == "local"}


def _loop_map(tags: list) -> dict:
    return {i: t[1] for i, t in enumerate(t for t in _kept(tags) if not (t and t[0] == "local"))
            if t and t[0] == "loop"}


def _split_shape(plan: Plan, x, mapping: Mapping[int, str]) -> tuple:
    shape = []
    for d, s in enumerate(x.shape):
        n = mapping.get(d)
        if n is not None and plan.loop_count(n) > 1 and plan.local(n):
            shape += [plan.loop_count(n), s // plan.loop_count(n)]
        else:
            shape.append(s)
    return tuple(shape)


def tile_function(plan: Plan, user: ClosedJaxpr, in_maps: Maps, out_maps: Maps,
                  parent: Substitution | None = None, mesh_vmapped: bool = False) -> Callable:
    in_ranks, out_ranks = _ranks(user, in_maps, out_maps)
    in_tags = [_tags(plan, m, r) for m, r in zip(in_maps, in_ranks)]
    out_tags = [_tags(plan, m, r) for m, r in zip(out_maps, out_ranks)]
    local = [n for n in plan.names if plan.local(n)]
    sub = Substitution(plan, global_view=False, parent=parent, mesh_vmapped=mesh_vmapped)
    if plan.used_loops:
        body = looped_body(sub, user, [_loop_map(t) for t in in_tags], [_loop_map(t) for t in out_tags],
                           [frozenset(m.values()) for m in in_maps])
    else:
        names = _input_names(in_maps)
        body = lambda *a: interpret(sub, user.jaxpr, user.consts, *a, names=names)  # noqa: E731
    vmapped = nested_vmap(_as_tuple(body), local, [_vmap_map(t) for t in in_tags],
                          [_vmap_map(t) for t in out_tags], {n: plan.chunk(n) for n in local}, plan.local)

    def per_device(*tiles):
        entered = []
        for x, m, tags in zip(tiles, in_maps, in_tags):
            x = x.reshape(_split_shape(plan, x, m)) if plan.used_loops else x
            # Named dims fully spread over devices have a tile of 1: squeeze them.
            gone = tuple(i for i, t in enumerate(tags) if t and t[0] == "squeeze")
            entered.append(jnp.squeeze(x, gone) if gone else x)
        outs = vmapped(*entered)
        results = []
        for y, m, tags in zip(outs, out_maps, out_tags):
            gone = tuple(i for i, t in enumerate(tags) if t and t[0] == "squeeze")
            y = jnp.expand_dims(y, gone) if gone else y
            if plan.used_loops:
                y = y.reshape(tuple(plan.tile(m[d]) if d in m else s
                                    for d, s in enumerate(_merge_shape(y.shape, tags))))
            results.append(y)
        return results

    return per_device


def _merge_shape(shape, tags) -> list:
    """Each (loop, local) pair of dims counted once (its product is set by
    the caller from the plan)."""
    out, skip = [], False
    for i, (s, t) in enumerate(zip(shape, tags)):
        if skip:
            skip = False
            continue
        if t and t[0] == "loop" and i + 1 < len(tags) and tags[i + 1] and tags[i + 1][0] == "local":
            skip = True
        out.append(s)
    return out


# -- the global view of a looped xmap: its tile program vmapped over the mesh axes ------------------

def _mesh_split(plan: Plan, mapping: Mapping[int, str], ndim: int) -> tuple[list, dict]:
    """For a global value: the shape factors per dimension (mesh axes, major
    first, then the tile) and ``{dim of the split value: mesh axis}``."""
    factors, axes_at, k = [], {}, 0
    for d in range(ndim):
        n = mapping.get(d)
        mesh = plan.mesh_resources(n) if n is not None else ()
        for a in mesh:
            axes_at[k] = a
            k += 1
        factors.append([plan.mesh_shape[a] for a in mesh])
        k += 1
    return factors, axes_at


def _vtile_by_mesh(plan: Plan, tile_fn: Callable, in_maps: Maps, out_maps: Maps, in_ranks, out_ranks) -> Callable:
    in_split = [_mesh_split(plan, m, r) for m, r in zip(in_maps, in_ranks)]
    out_split = [_mesh_split(plan, m, r) for m, r in zip(out_maps, out_ranks)]
    axes = list(plan.mesh_shape)  # nested xmaps may use the mesh axes this one does not
    vmapped = nested_vmap(_as_tuple(tile_fn), axes, [s[1] for s in in_split], [s[1] for s in out_split],
                          plan.mesh_shape, lambda a: a)

    def fn(*xs):
        outs = vmapped(*[x.reshape(_factor_shape(x.shape, f)) for x, (f, _) in zip(xs, in_split)])
        return [y.reshape(_global_shape(y.shape, f)) for y, (f, _) in zip(outs, out_split)]

    return fn


def _factor_shape(shape, factors) -> tuple:
    out = []
    for s, f in zip(shape, factors):
        parts = 1
        for p in f:
            parts *= p
        out += list(f) + [s // parts]
    return tuple(out)


def _global_shape(split_shape, factors) -> tuple:
    out, i = [], 0
    for f in factors:
        size = 1
        for s in split_shape[i:i + len(f) + 1]:
            size *= s
        out.append(size)
        i += len(f) + 1
    return tuple(out)


# -- a nested xmap ---------------------------------------------------------------------------------

def nested_xmap(sub: Substitution, params: dict, ins) -> list:
    """Evaluates an xmap equation inside the body of the xmap ``sub`` rewrites."""
    plan = plan_of(params)
    body = params["jaxpr"]
    in_maps = [mapping_of(s) for s in params["in_axes"]]
    out_maps = [mapping_of(s) for s in params["out_axes"]]
    if sub.global_view:
        # As 2022's SPMD lowering: XLA splits the nested xmap's values as it maps them (with the
        # enclosing xmaps' mesh axes on their vmapped dimensions), not only as the boundaries say.
        outer = sub.vmapped_layout(())
        layout = lambda x, m: constrain(x, plan.spec_dims(m, jnp.ndim(x)), outer, plan.mesh_shape)  # noqa: E731
        ins = [layout(x, m) for x, m in zip(ins, in_maps)]
        outs = global_function(plan, body, in_maps, out_maps, parent=sub, fixed=params["fixed_sharding"])(*ins)
        return [layout(y, m) for y, m in zip(outs, out_maps)]
    inner = Substitution(plan, global_view=False, parent=sub, mesh_vmapped=sub.mesh_vmapped)
    tiles = [_tile(inner, x, m) for x, m in zip(ins, in_maps)]
    outs = tile_function(plan, body, in_maps, out_maps, parent=sub, mesh_vmapped=sub.mesh_vmapped)(*tiles)
    results = []
    for y, m in zip(outs, out_maps):
        full = _untile(inner, y, m)
        if full is not y:  # a later nested xmap tiling it the same way takes this tile directly
            sub.untiled[id(full)] = (full, y, _layout(inner, m))
        results.append(full)
    return results


def _layout(sub: Substitution, mapping: Mapping[int, str]) -> tuple:
    return tuple((d, sub.plan.mesh_resources(n), sub.plan.tile(n)) for d, n in sorted(mapping.items())
                 if sub.plan.mesh_resources(n))


def _tile(sub: Substitution, x, mapping: Mapping[int, str]):
    """This device's tile of an operand along the mesh axes of its named dims
    (residuals passed from one nested xmap to the next skip the round trip)."""
    known = sub.parent.untiled.get(id(x)) if sub.parent is not None else None
    if known is not None and known[0] is x and known[2] == _layout(sub, mapping):
        return known[1]
    for d, n in sorted(mapping.items()):
        mesh = sub.plan.mesh_resources(n)
        if mesh:
            size = sub.plan.tile(n)
            index = lax.axis_index(mesh[0] if len(mesh) == 1 else mesh)
            x = lax.dynamic_slice_in_dim(x, index * size, size, axis=d)
    return x


def _untile(sub: Substitution, y, mapping: Mapping[int, str]):
    """A result gathered back along the mesh axes of its named dims."""
    for d, n in sorted(mapping.items()):
        mesh = sub.plan.mesh_resources(n)
        if mesh:
            y = rewrites._all_gather(sub, y, tuple(mesh), d, True)
    return y


register_nested(nested_xmap)
