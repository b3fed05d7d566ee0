"""Re-evaluating an xmap body with its named axes substituted.

The user's function is traced once per element, with every named axis at its
global size. To run it on tiles, each named-axis collective is re-bound over
the substituted axes ``plan.subst(name)`` (mesh axes, then the local vmap
axis), inside ``jax.vmap`` over the local axes and under an axis environment
of the mesh axes. jax's batching rules already split psum/pmax/pmin and
axis_index over a vmapped and a device axis; the rules here do what they
cannot: all_gather, ppermute and all_to_all over a mix of local and device
axes (and psum_scatter, via psum). In the global view (``global_view``) every
named axis is a vmap axis under its own name and the rules only decompose
what vmap cannot batch (several names, partial permutations).

Linear order along a substituted axis is major-to-minor: resources in their
given order, the local axis last (the 2022 order).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..invariance import axes_of
from ..jax_internals import core, parallel_primitives as lp
from .plan import Plan, XmapError

_CALLS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
          "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "remat": "jaxpr", "checkpoint": "jaxpr"}
_FORBIDDEN = {"pxla_pmap": "pxla_mlir.pmap", "xla_pmap": "jax.pmap", "shard_map": "jax.shard_map (or jax.pmap)"}


class Substitution:
    """Where each named axis of the body runs."""

    def __init__(self, plan: Plan, global_view: bool):
        self.plan, self.global_view = plan, global_view

    def axes(self, names) -> tuple:
        names = names if isinstance(names, (tuple, list)) else (names,)
        out: list = []
        for n in names:
            if n not in self.plan.sizes:
                out.append(n)  # not ours (e.g. an axis of an enclosing map)
            else:
                out.extend((n,) if self.global_view else self.plan.subst(n))
        return tuple(out)

    def is_local(self, axis) -> bool:
        return axis in self.plan.sizes if self.global_view else self.plan.is_local(axis)

    def mentions(self, eqn) -> bool:
        """Does the equation (or a jaxpr inside it) use one of our names?"""
        if any(n in self.plan.sizes for n in axes_of(eqn)):
            return True
        return any(self.mentions(e) for sub in core.jaxprs_in_params(eqn.params) for e in _jaxpr(sub).eqns)


def _jaxpr(sub):
    return sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub


def _one(axes: tuple):
    return axes[0] if len(axes) == 1 else axes


def interpret(sub: Substitution, jaxpr: core.Jaxpr, consts, *args) -> list:
    env: dict = {}

    def read(v):
        return v.val if isinstance(v, core.Literal) else env[v]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        outs = _eval(sub, eqn, [read(v) for v in eqn.invars])
        if eqn.primitive.multiple_results:
            env.update(zip(eqn.outvars, outs))
        else:
            env[eqn.outvars[0]] = outs
    return [read(v) for v in jaxpr.outvars]


def _eval(sub: Substitution, eqn, ins):
    p, params = eqn.primitive, dict(eqn.params)
    if p.name in _FORBIDDEN:
        raise XmapError(f"{_FORBIDDEN[p.name]} cannot be nested inside xmap; use a named axis of the xmap instead")
    if params.get("axis_index_groups") is not None and sub.mentions(eqn):
        raise XmapError(f"{p.name} with axis_index_groups over an xmap named axis is not supported")
    if p in (lp.psum_p, lp.pmax_p, lp.pmin_p):
        return p.bind(*ins, axes=sub.axes(params["axes"]), axis_index_groups=None)
    if p is lp.axis_index_p:
        return lax.axis_index(_one(sub.axes(params["axis_name"])))
    if p is lp.all_gather_p:
        return _all_gather(sub, ins[0], sub.axes(params["axis_name"]), params["all_gather_dimension"], params["tiled"])
    if p is lp.ppermute_p:
        return _ppermute(sub, ins[0], sub.axes(params["axis_name"]), params["perm"])
    if p is lp.all_to_all_p:
        return _all_to_all(sub, ins[0], sub.axes(params["axis_name"]), params["split_axis"],
                           params["concat_axis"], params["tiled"])
    if p is lp.reduce_scatter_p:
        return _psum_scatter(sub, ins[0], sub.axes(params["axis_name"]), params["scatter_dimension"],
                             params["tiled"])
    if p.name in _CALLS and _CALLS[p.name] in params:
        inner = params[_CALLS[p.name]]
        consts = inner.consts if isinstance(inner, core.ClosedJaxpr) else ()
        return interpret(sub, _jaxpr(inner), consts, *ins)  # inlined (forward evaluation)
    if core.jaxprs_in_params(params) and sub.mentions(eqn):
        # Control flow: re-trace each body through the interpreter here (inside
        # the vmaps and the mesh axis env), then bind with the new bodies.
        new = {k: _retrace(sub, v) for k, v in params.items()}
        return p.bind(*ins, **p.get_bind_params(new))
    return p.bind(*ins, **p.get_bind_params(params))


def _retrace(sub: Substitution, value):
    if isinstance(value, (tuple, list)):
        if value and all(isinstance(v, (core.ClosedJaxpr, core.Jaxpr)) for v in value):
            return type(value)(_retrace(sub, v) for v in value)
        return value
    if not isinstance(value, (core.ClosedJaxpr, core.Jaxpr)):
        return value
    closed = value if isinstance(value, core.ClosedJaxpr) else core.ClosedJaxpr(value, ())
    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in closed.jaxpr.invars]
    new = jax.make_jaxpr(lambda *a: interpret(sub, closed.jaxpr, closed.consts, *a))(*avals)
    if new.consts:
        raise XmapError("a collective over an xmap named axis inside control flow (cond/while/scan) needs "
                        "constant tables here (ppermute/all_to_all over a tiled axis), which is not supported")
    return new if isinstance(value, core.ClosedJaxpr) else new.jaxpr


# -- collectives that vmap cannot split ------------------------------------------------------

def _sizes(axes) -> list[int]:
    return [lax.axis_size(a) for a in axes]


def _gather(sub: Substitution, x, axes: tuple):
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


def _all_gather(sub: Substitution, x, axes: tuple, dim: int, tiled: bool):
    if not any(sub.is_local(a) for a in axes):
        return lax.all_gather(x, _one(axes), axis=dim, tiled=tiled)
    y = jnp.moveaxis(_gather(sub, x, axes), 0, dim)
    if tiled:
        shape = list(y.shape)
        y = y.reshape(shape[:dim] + [shape[dim] * shape[dim + 1]] + shape[dim + 2:])
    return y


def _linear_index(axes: tuple):
    return lax.axis_index(_one(axes)) if axes else jnp.int32(0)


def _device_ppermute(sub: Substitution, x, dev_axes: tuple, pairs):
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


def _ppermute(sub: Substitution, x, axes: tuple, perm):
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
    my_local = _linear_index(loc_axes)
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
            received = jnp.where(jnp.asarray(keep)[_linear_index(dev_axes)], piece, jnp.zeros_like(piece))
        else:
            received = _device_ppermute(sub, piece, dev_axes, pairs)
        # Several groups may fill the same local slot from different devices;
        # devices outside a group receive zeros, so sum instead of overwrite.
        out = out + jnp.where(my_local == lt, received, jnp.zeros_like(received))
    return out


def _all_to_all(sub: Substitution, x, axes: tuple, split_axis: int, concat_axis: int, tiled: bool):
    if len(axes) == 1 and not sub.is_local(axes[0]):
        return lax.all_to_all(x, axes[0], split_axis, concat_axis, tiled=tiled)
    # Element g receives chunk g of every element k: gather all, keep chunk g.
    n = math.prod(_sizes(axes))
    everything = _gather(sub, x, axes)  # [n, *x.shape]
    shape = list(everything.shape)
    s = split_axis + 1
    chunks = everything.reshape(shape[:s] + [n, shape[s] // n] + shape[s + 1:])
    mine = lax.dynamic_index_in_dim(chunks, _linear_index(axes), axis=s, keepdims=False)  # [n(k), ...chunk...]
    if tiled:
        moved = jnp.moveaxis(mine, 0, concat_axis)
        shape = list(moved.shape)
        return moved.reshape(shape[:concat_axis] + [shape[concat_axis] * shape[concat_axis + 1]]
                             + shape[concat_axis + 2:])
    squeezed = mine.reshape(mine.shape[:s] + mine.shape[s + 1:]) if mine.shape[s] == 1 else mine
    return jnp.moveaxis(squeezed, 0, concat_axis)


def _psum_scatter(sub: Substitution, x, axes: tuple, dim: int, tiled: bool):
    n = math.prod(_sizes(axes))
    total = lax.psum(x, _one(axes))
    index = _linear_index(axes)
    if tiled:
        size = x.shape[dim] // n
        return lax.dynamic_slice_in_dim(total, index * size, size, axis=dim)
    return lax.dynamic_index_in_dim(total, index, axis=dim, keepdims=False)
