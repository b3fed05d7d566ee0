"""The two programs an xmap body becomes.

* the *global view* (SPMD vectorize): every named axis is a ``jax.vmap`` at
  its full size under its own name, over global arrays;
* the *tile* (SPMD manual and replica mode): what one device runs on its
  tiles: ``jax.vmap`` over the local part of each named axis, collectives
  re-bound over mesh axes (see :mod:`.interpreter`), traced under an axis
  environment of the mesh axes.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import jax
import jax.numpy as jnp

from ..jax_internals import core
from .interpreter import Substitution, interpret
from .plan import Plan

Maps = Sequence[Mapping[int, str]]  # per value: {dimension: named axis}


def nested_vmap(f: Callable, names: Sequence[str], in_maps: Maps, out_maps: Maps, sizes: Mapping[str, int],
                vmap_name: Callable[[str], str]) -> Callable:
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


def global_function(plan: Plan, user: core.ClosedJaxpr, in_maps: Maps, out_maps: Maps) -> Callable:
    sub = Substitution(plan, global_view=True)
    body = _as_tuple(lambda *a: interpret(sub, user.jaxpr, user.consts, *a))
    return nested_vmap(body, plan.names, in_maps, out_maps, plan.sizes, lambda n: n)


def _split(maps: Maps, keep: Sequence[str]) -> tuple[list[dict], list[list[int]]]:
    """Maps restricted to ``keep`` (re-indexed once the other named dims are
    squeezed away), and those squeezed dims."""
    kept, squeezed = [], []
    for m in maps:
        gone = sorted(d for d, n in m.items() if n not in keep)
        kept.append({d - sum(1 for g in gone if g < d): n for d, n in m.items() if n in keep})
        squeezed.append(gone)
    return kept, squeezed


def tile_function(plan: Plan, user: core.ClosedJaxpr, in_maps: Maps, out_maps: Maps) -> Callable:
    local = [n for n in plan.names if plan.local(n)]
    in_kept, in_gone = _split(in_maps, local)
    out_kept, out_gone = _split(out_maps, local)
    sub = Substitution(plan, global_view=False)
    body = _as_tuple(lambda *a: interpret(sub, user.jaxpr, user.consts, *a))
    vmapped = nested_vmap(body, local, in_kept, out_kept, {n: plan.tile(n) for n in local}, plan.local)

    def per_device(*tiles):
        # Named dims fully spread over devices have a tile of 1: squeeze them.
        tiles = [jnp.squeeze(t, tuple(g)) if g else t for t, g in zip(tiles, in_gone)]
        outs = vmapped(*tiles)
        return [jnp.expand_dims(o, tuple(g)) if g else o for o, g in zip(outs, out_gone)]

    return per_device
