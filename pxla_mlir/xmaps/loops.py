"""Serial loop resources: an xmap's chunks run one after another on a device.

A named axis with loop resources is cut, on each device, into ``L`` chunks
(``L``: the product of its loop lengths) that one ``lax.scan`` works through
(a ``while`` in the MHLO), so intermediates take the memory of one chunk.
Inside the scan, ``axis_index`` of a looped axis adds the iteration (the
substitution's ``loop_index``); collectives over a looped axis need every
chunk, so the body is cut there into *stages*: runs of equations evaluated
by a scan, and the equations using such collectives (at any depth: control
flow, nested xmaps), evaluated once for all chunks with each loop as a
``jax.vmap`` axis under its own name, where the collective is an ordinary
collective over (mesh axes, loops, local axis). Values crossing a stage
boundary are stacked over the iterations (scan outputs) unless they do not
vary along any looped axis (a host call's result may differ per call: it
varies). A psum/pmax/pmin of a value that does not vary over its axes is
arithmetic in every stage, as without loops (not vmap's batching of an
unmapped operand, whose product of a complex value makes ``inf * 0 = nan``).

Within the local ``jax.vmap`` of the tile program, a value arrives with one
*loop dimension* per looped named dimension (size ``L`` of that name);
:class:`Looped` keeps it as leading dimensions, one per loop, in plan order.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
from jax import lax

from pxla_mlir.jaxbridge.jax_internals import api_util, core
from pxla_mlir.maps.invariance import Names, value_names
from pxla_mlir.maps.tracing import trace_flat
from pxla_mlir.mlir.collectives import CALL_JAXPR_PARAMS, COLLECTIVES, axes_of
from pxla_mlir.xmaps.interpreter import Substitution, read, run_eqns

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr, Jaxpr

__all__ = ["looped_body"]


@dataclasses.dataclass
class Looped:
    """A value stacked over the iterations of ``loops`` (its leading dims)."""

    value: jax.Array
    loops: tuple

    def at(self, index: dict):
        x = self.value
        for loop in self.loops:
            x = lax.dynamic_index_in_dim(x, index[loop], axis=0, keepdims=False)
        return x


@dataclasses.dataclass
class Stage:
    eqns: list
    cut: bool  # uses a collective over a looped axis: all chunks at once
    inputs: list = dataclasses.field(default_factory=list)
    outputs: list = dataclasses.field(default_factory=list)


def _uses_looped_collective(eqn, looped: set) -> bool:
    if eqn.primitive.name in COLLECTIVES and eqn.primitive.name != "axis_index" and set(axes_of(eqn)) & looped:
        return True
    return any(_uses_looped_collective(e, looped) for sub in core.jaxprs_in_params(eqn.params)
               for e in (sub.jaxpr if isinstance(sub, core.ClosedJaxpr) else sub).eqns)


def _stages(jaxpr: Jaxpr, looped: set) -> list[Stage]:
    stages: list[Stage] = []
    for eqn in jaxpr.eqns:
        cut = _uses_looped_collective(eqn, looped)
        if stages and stages[-1].cut == cut:
            stages[-1].eqns.append(eqn)
        else:
            stages.append(Stage([eqn], cut))
    later: set = {v for v in jaxpr.outvars if isinstance(v, core.Var)}
    for stage in reversed(stages):
        defined = {v for e in stage.eqns for v in e.outvars}
        used = [v for e in stage.eqns for v in e.invars if isinstance(v, core.Var) and v not in defined]
        stage.outputs = [v for e in stage.eqns for v in e.outvars if v in later]
        stage.inputs = list(dict.fromkeys(used))  # in order of first use
        later |= set(stage.inputs)
    return stages


def _inline_calls(closed: ClosedJaxpr, env: list) -> ClosedJaxpr:
    """The body with calls (jit, custom derivatives, checkpoint) inlined, so
    a collective inside a call can be a stage boundary of its own."""

    def run(jaxpr, consts, args):
        values = dict(zip(jaxpr.constvars, consts))
        values.update(zip(jaxpr.invars, args))
        for eqn in jaxpr.eqns:
            ins = [read(values, v) for v in eqn.invars]
            key = CALL_JAXPR_PARAMS.get(eqn.primitive.name)
            if key is not None and key in eqn.params:
                inner = eqn.params[key]
                inner_consts = inner.consts if isinstance(inner, core.ClosedJaxpr) else ()
                outs = run(inner.jaxpr if isinstance(inner, core.ClosedJaxpr) else inner, inner_consts, ins)
            else:
                outs = eqn.primitive.bind(*ins, **eqn.primitive.get_bind_params(dict(eqn.params)))
                outs = outs if eqn.primitive.multiple_results else [outs]
            values.update(zip(eqn.outvars, outs))
        return [read(values, v) for v in jaxpr.outvars]

    debug = api_util.debug_info("xmap loop body", run, tuple(range(len(closed.in_avals))), {})
    return trace_flat(lambda *a: run(closed.jaxpr, closed.consts, a), closed.in_avals, env, debug, binder="xmap")


def looped_body(sub: Substitution, jaxpr: ClosedJaxpr, in_loops: Sequence[dict], out_loops: Sequence[dict],
                in_names: Sequence[Names]) -> Callable:
    """The per-element body (inside the local vmaps) of a looped xmap.
    ``in_loops``/``out_loops``: per value, ``{element dim: named axis}`` of
    its loop dimensions; ``in_names``: the named axes each input varies over."""
    plan = sub.plan
    loops = plan.used_loops
    lengths = [plan.loops[loop] for loop in loops]
    looped = {n for n in plan.names if plan.loop_resources(n)}
    flat = _inline_calls(jaxpr, sub.scope())
    names = value_names(flat.jaxpr, list(in_names), impure=Names(plan.sizes))  # a host call may differ per call
    stages = _stages(flat.jaxpr, looped)

    def body(*elems):
        env: dict = dict(zip(flat.jaxpr.constvars, flat.consts))
        for v, x, at in zip(flat.jaxpr.invars, elems, in_loops):
            env[v] = _stack(plan, x, at) if at else x
        for stage in stages:
            (_cut if stage.cut else _scan)(sub, stage, env, loops, lengths, names, looped)
        return [_unstack(plan, read(env, v), at) for v, at in zip(flat.jaxpr.outvars, out_loops)]

    return body


def _scan(sub, stage: Stage, env: dict, loops, lengths, names, looped) -> None:
    carried = [v for v in stage.outputs if not (names.get(v, Names()) & looped)]
    stacked = [v for v in stage.outputs if names.get(v, Names()) & looped]
    outside = {v: env[v] for v in stage.inputs}

    def step(carry, _):
        i = carry[0]  # the iteration; the rest carries values that do not vary along a looped axis
        index, rest = {}, i
        for loop, length in reversed(list(zip(loops, lengths))):
            if len(loops) == 1:
                index[loop] = rest
            else:
                index[loop], rest = lax.rem(rest, jnp.int32(length)), lax.div(rest, jnp.int32(length))
        values = {v: (x.at(index) if isinstance(x, Looped) else x) for v, x in outside.items()}
        run_eqns(sub.with_loop_index(index), stage.eqns, values, names)
        return [i + 1, *(values[v] for v in carried)], [values[v] for v in stacked]

    init = [jnp.int32(0), *(jnp.zeros(v.aval.shape, v.aval.dtype) for v in carried)]
    final, ys = lax.scan(step, init, None, length=math.prod(lengths))
    final = final[1:]
    env.update(zip(carried, final))
    for v, y in zip(stacked, ys):
        env[v] = Looped(y.reshape(tuple(lengths) + y.shape[1:]), tuple(loops))


def _cut(sub, stage: Stage, env: dict, loops, lengths, names, looped) -> None:
    values = [env[v] for v in stage.inputs]

    def run(*xs):
        local = dict(zip(stage.inputs, xs))
        run_eqns(sub.with_loop_index(None), stage.eqns, local, names)
        return [local[v] for v in stage.outputs]

    fn = run
    for loop, length in reversed(list(zip(loops, lengths))):
        in_axes = [0 if isinstance(x, Looped) and loop in x.loops else None for x in values]
        fn = jax.vmap(fn, in_axes=in_axes, out_axes=0, axis_name=loop, axis_size=length)
    outs = fn(*[x.value if isinstance(x, Looped) else x for x in values])
    env.update((v, Looped(y, tuple(loops))) for v, y in zip(stage.outputs, outs))


def _stack(plan, x, at: dict) -> Looped:
    """An input with loop dims at ``at`` -> leading dims, one per loop."""
    dims = sorted(at)
    own = [plan.loop_resources(at[d]) for d in dims]
    x = jnp.moveaxis(x, dims, list(range(len(dims))))
    split = [plan.loops[loop] for group in own for loop in group]
    x = x.reshape(tuple(split) + x.shape[len(dims):])
    order = [loop for group in own for loop in group]
    ranked = sorted(range(len(order)), key=lambda i: plan.used_loops.index(order[i]))
    return Looped(jnp.transpose(x, ranked + list(range(len(order), x.ndim))), tuple(order[i] for i in ranked))


def _unstack(plan, value, at: dict):
    """A result (a Looped or a plain value) -> the element with one loop dim
    per looped named dim of its out_axes (at ``at``)."""
    dims = sorted(at)
    need = [loop for d in dims for loop in plan.loop_resources(at[d])]
    if isinstance(value, Looped):
        x, have = value.value, list(value.loops)
        for loop in [lp for lp in have if lp not in need]:  # invariant along it: any iteration will do
            k = have.index(loop)
            x = lax.index_in_dim(x, 0, axis=k, keepdims=False)
            have.pop(k)
    else:
        x, have = jnp.asarray(value), []
    for loop in need:
        if loop not in have:  # broadcast along an axis the value does not vary over
            x = jnp.broadcast_to(x[None], (plan.loops[loop],) + x.shape)
            have.insert(0, loop)
    x = jnp.transpose(x, [have.index(loop) for loop in need] + list(range(len(have), x.ndim)))
    sizes = [plan.loop_count(at[d]) for d in dims]
    x = x.reshape(tuple(sizes) + x.shape[len(need):])
    return jnp.moveaxis(x, list(range(len(dims))), dims) if dims else x
