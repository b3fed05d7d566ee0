"""How xmap re-binds each collective on the substituted axes of its names.

Inside the tile program a named axis ``n`` is ``plan.subst(n)``: mesh axes,
serial loops and a local vmap axis (see :mod:`.plan`). jax's batching rules
already split psum/pmax/pmin and axis_index over a vmapped and a device axis,
so those are re-bound as they are (:func:`rebind`, :func:`axis_index`); the
rewrites here do what vmap cannot: all_gather, ppermute, all_to_all,
psum_scatter and pbroadcast over a mix of local and device axes, and
``axis_index_groups`` (gather the axis, reduce or pick within the group). In
the global view every named axis is a vmap axis under its own name.
:data:`RULES` maps each collective of :mod:`pxla_mlir.mlir.collectives` to its
rule, called as ``rule(sub, primitive, params, inputs)`` (``sub``: the
interpreter's ``Substitution``); the collectives of :data:`UNCHANGED` are
bound as they are.

Linear order along a substituted axis is major-to-minor: resources in their
given order, the local axis last (the 2022 order).
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["RULES", "REDUCTIONS", "UNCHANGED", "rebind", "reduce_invariant", "axis_index", "all_gather", "ppermute",
           "all_to_all", "psum_scatter", "pbroadcast"]


def _one(axes: tuple):
    return axes[0] if len(axes) == 1 else axes


def _names(params, key):
    names = params[key]
    return tuple(names) if isinstance(names, (tuple, list)) else (names,)


def rebind(sub, prim, params, ins):
    """psum/pmax/pmin: the same primitive over the substituted axes."""
    groups = params.get("axis_index_groups")
    if groups is not None:
        return _grouped_reduce(sub, prim, ins[0], _names(params, "axes"), groups)
    return prim.bind(*ins, axes=sub.axes(params["axes"]), axis_index_groups=None)


def reduce_invariant(sub, prim, params, ins, invariant: tuple):
    """psum/pmax/pmin over named axes some of which (``invariant``) the
    operands do not vary over: along those the reduction is arithmetic (a
    sum of equal values is the value times the axis size, as jax's constant
    psum computes it; a max or min is the value), so only the other axes need
    a collective."""
    if prim.name == "psum":
        size = math.prod(sub.plan.sizes[n] for n in invariant)
        ins = [_times(x, size) for x in ins]
    rest = tuple(n for n in params["axes"] if n not in invariant)
    if not rest:
        return ins if prim.multiple_results else ins[0]
    return rebind(sub, prim, {**params, "axes": rest}, ins)


def _times(x, size: int):
    """``size`` equal values summed as the collective sums them: integers
    wrap, a complex value's parts add separately (no ``inf * 0`` from a
    complex product), a zero sum is +0 (the sum starts from +0, so -0
    values sum to +0, as ``jax.jit(shard_map)``'s psum does)."""
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        return lax.complex(_times(jnp.real(x), size), _times(jnp.imag(x), size))
    y = x * np.asarray(size).astype(x.dtype)
    if jnp.issubdtype(x.dtype, jnp.floating):  # a select XLA does not fold (it folds -0 + 0 to -0, x*n/n to x)
        y = jnp.where(y == 0, jnp.zeros_like(y), y)
    return y


def axis_index(sub, prim, params, ins):
    return sub.index(params["axis_name"])


def all_gather(sub, prim, params, ins):
    groups = params.get("axis_index_groups")
    if groups is not None:
        return _grouped_gather(sub, ins[0], _names(params, "axis_name"), groups, params["all_gather_dimension"],
                               params["tiled"])
    return _all_gather(sub, ins[0], sub.axes(params["axis_name"]), params["all_gather_dimension"], params["tiled"])


def ppermute(sub, prim, params, ins):
    return _ppermute(sub, ins[0], sub.axes(params["axis_name"]), params["perm"])


def all_to_all(sub, prim, params, ins):
    return _all_to_all(sub, ins[0], sub.axes(params["axis_name"]), params["split_axis"], params["concat_axis"],
                       params["tiled"])


def psum_scatter(sub, prim, params, ins):
    names, groups = _names(params, "axis_name"), params.get("axis_index_groups")
    axes = sub.axes(names)
    dim, tiled = params["scatter_dimension"], params["tiled"]
    if groups is None and len(axes) == 1 and not sub.is_local(axes[0]):
        return lax.psum_scatter(ins[0], axes[0], scatter_dimension=dim, tiled=tiled)
    if groups is None:
        total, index, n = lax.psum(ins[0], _one(axes)), _linear_index(sub, names), math.prod(_sizes(axes))
    else:
        total = _grouped_reduce(sub, lax.psum_p, ins[0], names, groups)
        position = np.zeros(math.prod(_sizes(axes)), np.int32)
        for group in groups:
            position[list(group)] = np.arange(len(group))
        index, n = jnp.asarray(position)[_linear_index(sub, names)], len(groups[0])
    if tiled:
        size = ins[0].shape[dim] // n
        return lax.dynamic_slice_in_dim(total, index * size, size, axis=dim)
    return lax.dynamic_index_in_dim(total, index, axis=dim, keepdims=False)


def pbroadcast(sub, prim, params, ins):
    """Every element gets the value of element ``source``: a masked psum."""
    x, names = ins[0], _names(params, "axis_name")
    mine = _linear_index(sub, names) == params["source"]
    as_int = x.dtype == jnp.bool_
    y = x.astype(jnp.int32) if as_int else x
    total = lax.psum(jnp.where(mine, y, jnp.zeros_like(y)), _one(sub.axes(names)))
    return total.astype(jnp.bool_) if as_int else total


# -- what vmap cannot split -----------------------------------------------------------------

def _sizes(axes) -> list[int]:
    return [lax.axis_size(a) for a in axes]


def _gather(sub, x, axes: tuple):
    """Every element along ``axes`` (major first) stacked on a new leading dim."""
    if not axes:
        return x[None]
    runs: list[list] = []  # consecutive device axes share one collective
    for a in axes:
        if runs and not sub.is_local(a) and not sub.is_local(runs[-1][-1]):
            runs[-1].append(a)
        else:
            runs.append([a])
    y = x
    for run in reversed(runs):
        y = lax.all_gather(y, _one(tuple(run)), axis=0, tiled=False)
    return y.reshape((math.prod(y.shape[:len(runs)]),) + y.shape[len(runs):])


def _all_gather(sub, x, axes: tuple, dim: int, tiled: bool):
    if x.size == 0:  # nothing to move; MHLO rejects an all_gather along a dimension of size 0
        shape = list(x.shape)
        n = math.prod(_sizes(axes))
        shape[dim:dim + 1] = [shape[dim] * n] if tiled else [n, shape[dim]] if dim < len(shape) else [n]
        return jnp.zeros(shape, x.dtype)
    if not any(sub.is_local(a) for a in axes):
        return lax.all_gather(x, _one(axes), axis=dim, tiled=tiled)
    y = jnp.moveaxis(_gather(sub, x, axes), 0, dim)
    if tiled:
        shape = list(y.shape)
        y = y.reshape(shape[:dim] + [shape[dim] * shape[dim + 1]] + shape[dim + 2:])
    return y


def _linear_index(sub, names: tuple):
    return sub.index(names) if names else jnp.int32(0)


def _local_index(axes: tuple):
    return lax.axis_index(_one(axes)) if axes else jnp.int32(0)


def _device_ppermute(sub, x, dev_axes: tuple, pairs):
    """ppermute over device axes with pairs numbered in ``dev_axes`` order.
    jax's lowering numbers a multi-axis ppermute in *mesh* order (it sorts the
    groups) while axis_index uses tuple order: renumber the pairs."""
    mesh_names = list(sub.plan.mesh_shape)
    order = sorted(range(len(dev_axes)), key=lambda i: mesh_names.index(dev_axes[i]))
    sizes = [sub.plan.mesh_shape[a] for a in dev_axes]

    def renumber(g):
        coords = np.unravel_index(g, sizes)
        return int(np.ravel_multi_index([coords[i] for i in order], [sizes[i] for i in order]))

    mesh_axes = tuple(dev_axes[i] for i in order)
    return lax.ppermute(x, _one(mesh_axes), [(renumber(s), renumber(t)) for s, t in pairs])


def _ppermute(sub, x, axes: tuple, perm):
    local = [i for i, a in enumerate(axes) if sub.is_local(a)]
    if not local:
        return _device_ppermute(sub, x, axes, perm)
    sizes = _sizes(axes)
    device = [i for i in range(len(axes)) if i not in local]
    dev_axes, loc_axes = tuple(axes[i] for i in device), tuple(axes[i] for i in local)

    def split(g):
        coords = np.unravel_index(g, sizes)

        def linear(idx):
            return int(np.ravel_multi_index([coords[i] for i in idx], [sizes[i] for i in idx])) if idx else 0
        return linear(device), linear(local)

    everything = _gather(sub, x, loc_axes)  # every local element of this tile
    my_local = _local_index(loc_axes)
    if not device:  # all axes vectorized: one gather and a select
        source = np.zeros(math.prod(sizes), np.int32)
        receives = np.zeros(math.prod(sizes), bool)
        for s, t in perm:
            source[t], receives[t] = s, True
        y = everything[jnp.asarray(source)[my_local]]
        return jnp.where(jnp.asarray(receives)[my_local], y, jnp.zeros_like(y))
    groups: dict = {}
    for s, t in perm:
        (ds, ls), (dt, lt) = split(s), split(t)
        groups.setdefault((ls, lt), []).append((ds, dt))
    n_dev = math.prod(sizes[i] for i in device)
    out = jnp.zeros_like(x)
    for (ls, lt), pairs in sorted(groups.items()):
        piece = everything[ls]
        if all(a == b for a, b in pairs):  # stays on its device: no communication
            keep = np.zeros(n_dev, bool)
            keep[[b for _, b in pairs]] = True
            received = jnp.where(jnp.asarray(keep)[_local_index(dev_axes)], piece, jnp.zeros_like(piece))
        else:
            received = _device_ppermute(sub, piece, dev_axes, pairs)
        # Several groups may fill the same local slot from different devices;
        # devices outside a group receive zeros, so sum instead of overwrite.
        out = out + jnp.where(my_local == lt, received, jnp.zeros_like(received))
    return out


def _all_to_all(sub, x, axes: tuple, split_axis: int, concat_axis: int, tiled: bool):
    if len(axes) == 1 and not sub.is_local(axes[0]):
        return lax.all_to_all(x, axes[0], split_axis, concat_axis, tiled=tiled)
    # Element g receives chunk g of every element k: gather all, keep chunk g.
    n = math.prod(_sizes(axes))
    everything = _gather(sub, x, axes)  # [n, *x.shape]
    shape = list(everything.shape)
    s = split_axis + 1
    chunks = everything.reshape(shape[:s] + [n, shape[s] // n] + shape[s + 1:])
    mine = lax.dynamic_index_in_dim(chunks, _local_index(axes), axis=s, keepdims=False)  # [n(k), ...chunk...]
    if tiled:
        moved = jnp.moveaxis(mine, 0, concat_axis)
        shape = list(moved.shape)
        return moved.reshape(shape[:concat_axis] + [shape[concat_axis] * shape[concat_axis + 1]]
                             + shape[concat_axis + 2:])
    squeezed = mine.reshape(mine.shape[:s] + mine.shape[s + 1:]) if mine.shape[s] == 1 else mine
    return jnp.moveaxis(squeezed, 0, concat_axis)


# -- axis_index_groups: gather the axis, then reduce or pick within the group -------------------

def _group_of(groups, n: int) -> np.ndarray:
    member = np.full(n, -1, np.int32)
    for g, group in enumerate(groups):
        member[list(group)] = g
    if (member < 0).any():
        raise ValueError(f"axis_index_groups {groups} do not cover every index of the axis (size {n})")
    return member


def _grouped_reduce(sub, prim, x, names: tuple, groups):
    axes = sub.axes(names)
    n = math.prod(_sizes(axes))
    member = jnp.asarray(_group_of(groups, n))
    everything = _gather(sub, x, axes)  # [n, *x.shape]
    mask = (member == member[_linear_index(sub, names)]).reshape((n,) + (1,) * x.ndim)
    if prim.name == "psum":
        return jnp.sum(jnp.where(mask, everything, jnp.zeros_like(everything)), axis=0).astype(x.dtype)
    if jnp.issubdtype(x.dtype, jnp.inexact):
        fill = -jnp.inf if prim.name == "pmax" else jnp.inf
    else:
        info = jnp.iinfo(x.dtype) if x.dtype != jnp.bool_ else None
        fill = (info.min if prim.name == "pmax" else info.max) if info else prim.name != "pmax"
    masked = jnp.where(mask, everything, jnp.full_like(everything, fill))
    return (jnp.max if prim.name == "pmax" else jnp.min)(masked, axis=0)


def _grouped_gather(sub, x, names: tuple, groups, dim: int, tiled: bool):
    axes = sub.axes(names)
    n = math.prod(_sizes(axes))
    member = _group_of(groups, n)
    table = jnp.asarray(np.array([groups[member[k]] for k in range(n)], np.int32))  # [n, group size]
    picked = _gather(sub, x, axes)[table[_linear_index(sub, names)]]  # [group size, *x.shape]
    y = jnp.moveaxis(picked, 0, dim)
    if tiled:
        shape = list(y.shape)
        y = y.reshape(shape[:dim] + [shape[dim] * shape[dim + 1]] + shape[dim + 2:])
    return y


#: How xmap rebinds each collective (by primitive name) on the substituted axes.
RULES = {"psum": rebind, "pmax": rebind, "pmin": rebind, "all_gather": all_gather, "axis_index": axis_index,
         "ppermute": ppermute, "all_to_all": all_to_all, "reduce_scatter": psum_scatter, "pbroadcast": pbroadcast}
#: The reductions whose operand may be known not to vary over an axis (:func:`reduce_invariant`).
REDUCTIONS = frozenset({"psum", "pmax", "pmin"})
#: shard_map's varying-manual-axes bookkeeping: bound unchanged.
UNCHANGED = frozenset({"psum_invariant", "pvary", "all_gather_invariant"})
