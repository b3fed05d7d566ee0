"""Cached-call latency of pxla_mlir.pmap against jax.pmap (jax 0.10.2) and of
pxla_mlir.xmap against jax.jit(shard_map), on 8 virtual CPU devices, measured
interleaved in one run.

    python bench/bench_dispatch.py [--rounds 15] [--calls 100] [--clock wall|thread]

Rows: 1 argument and 100 arguments with device-resident inputs, a pytree of
500 leaves, and 1 host (numpy) argument; for each, the time until the call
returns (dispatch) and until its result is ready (blocked), and the floor:
the bare ``execute_sharded`` of the same executable with already-placed
inputs. The xmap row calls ``pxla_mlir.xmap`` with 1 argument laid out on an
8-device mesh against ``jax.jit(shard_map)`` of the same body (jax 0.10.2 has
no xmap). Target: our overhead above the floor (the last column) <= 0.5x
jax's, for 1 and 100 arguments and 500 leaves. ``--clock thread`` times the
calling thread's CPU time instead of the wall clock (the dispatch work
itself, steadier on a loaded machine; the devices' threads are not in it).
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import argparse
import statistics
import time

import jax
import numpy as np
from jax import lax

import pxla_mlir


def one(x):
    return lax.psum(x * 2, "i")


def hundred(*xs):
    return [lax.psum(xs[0], "i")] + [x * 2 for x in xs[1:]]


def leaves500(tree):
    return jax.tree.map(lambda v: v * 2, tree)


def one_named(axis: str):
    return lambda x: lax.psum(x * 2, axis) + x


def cases():
    rng = np.random.default_rng(0)
    f32 = np.float32
    return {
        "1 arg (psum)": (one, (rng.normal(size=(8, 16)).astype(f32),)),
        "100 args": (hundred, tuple(rng.normal(size=(8, 4)).astype(f32) for _ in range(100))),
        "500-leaf pytree": (leaves500, ({f"p{k}": rng.normal(size=(8, 2)).astype(f32) for k in range(500)},)),
        "xmap 1 arg": (one_named, (rng.normal(size=(8, 16)).astype(f32),)),
    }


CLOCK = time.perf_counter


def timed_calls(fn, args, calls: int, block: bool) -> float:
    """Mean seconds per call: until it returns (dispatch; the result is then
    waited for outside the timing, so no launch is left un-completed: jax.pmap
    and the bare executable have no in-flight window) or until its result is
    ready (blocked). Freeing the previous result is not timed: it costs
    every side the same and, for 500 leaves, more than a call's dispatch."""
    total = 0.0
    out = None
    for _ in range(calls):
        del out  # the previous result is freed outside the timing (500 leaves: 4,000 buffers, milliseconds)
        t = CLOCK()
        out = fn(*args)
        if block:
            jax.block_until_ready(out)
            total += CLOCK() - t
        else:
            total += CLOCK() - t
            jax.block_until_ready(out)
    return total / calls


def floor_call(pfun, args):
    """The bare executable: pre-placed inputs, execute_sharded, result handlers."""
    compiled = pfun.lower(*args).compile()
    exe = compiled.executable
    leaves = jax.tree.leaves(args)
    placed = [exe.place(x, i) for i, x in enumerate([*compiled.consts, *leaves])]
    handlers = exe._handlers  # noqa: SLF001 (the floor is the executable itself)
    return lambda *_: exe.xla.execute_sharded(placed).consume_with_handlers(handlers)


def on_devices(pmap, args) -> tuple:
    """Each argument resident where a pmap's output would be."""
    ident = pmap(lambda t: t, "i")
    return tuple(ident(a) for a in args)


def xmap_sides(body, args):
    """pxla_mlir.xmap and jax.jit(shard_map) of ``body``, on the mesh of every device (in scope while measuring),
    and each one's inputs laid out on it."""
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("d",))
    ours = pxla_mlir.xmap(body("i"), ["i", ...], ["i", ...], axis_resources={"i": "d"})
    theirs = jax.jit(jax.shard_map(body("d"), mesh=mesh, in_specs=PartitionSpec("d"), out_specs=PartitionSpec("d")))
    ident = pxla_mlir.xmap(lambda t: t, ["i", ...], ["i", ...], axis_resources={"i": "d"})
    dev_ours = tuple(ident(a) for a in args)
    dev_theirs = tuple(jax.device_put(a, NamedSharding(mesh, PartitionSpec("d"))) for a in args)
    return ours, theirs, dev_ours, dev_theirs


def measure(fn, args, rounds: int, calls: int) -> dict:
    if fn is one_named:
        ours, theirs, dev_ours, dev_theirs = xmap_sides(fn, args)
    else:
        ours, theirs = pxla_mlir.pmap(fn, "i"), jax.pmap(fn, "i")
        dev_ours, dev_theirs = on_devices(pxla_mlir.pmap, args), on_devices(jax.pmap, args)
    floor = floor_call(ours, dev_ours)
    sides = {"pxla_mlir": (ours, dev_ours), "jax.pmap": (theirs, dev_theirs), "floor": (floor, dev_ours)}
    for f, a in sides.values():  # warm every signature
        jax.block_until_ready(f(*a))
    samples: dict = {(side, block): [] for side in sides for block in (False, True)}
    for _ in range(rounds):
        for side, (f, a) in sides.items():
            for block in (False, True):
                samples[side, block].append(timed_calls(f, a, calls, block))
    host = {"pxla_mlir": [], "jax.pmap": []}
    if fn is one:
        for _ in range(rounds):
            for side, f in (("pxla_mlir", ours), ("jax.pmap", theirs)):
                host[side].append(timed_calls(f, args, calls, True))
    return {k: statistics.median(v) for k, v in samples.items()}, {k: statistics.median(v) for k, v in host.items()
                                                                   if v}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.thread_time if args.clock == "thread" else time.perf_counter
    print(f"jax {jax.__version__}, {len(jax.devices())} {jax.devices()[0].platform} devices, {os.cpu_count()} cores; "
          f"medians of {args.rounds} interleaved rounds of {args.calls} calls, {args.clock} clock, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("(the jax column: jax.pmap; for the xmap row jax.jit(shard_map))")
    print(f"{'case':<18} {'measure':<10} {'pxla_mlir':>11} {'jax':>11} {'floor':>11} {'ratio':>7}  "
          f"{'over floor (pxla / jax)':>24}")
    for name, (fn, fargs) in cases().items():
        if fn is one_named:  # an xmap runs on the mesh in scope
            with pxla_mlir.Mesh(np.array(jax.devices()), ("d",)):
                times, host = measure(fn, fargs, args.rounds, args.calls)
        else:
            times, host = measure(fn, fargs, args.rounds, args.calls)
        for block, label in ((False, "dispatch"), (True, "blocked")):
            ours, theirs, floor = (times[s, block] for s in ("pxla_mlir", "jax.pmap", "floor"))
            print(f"{name:<18} {label:<10} {ours * 1e6:>9.1f}us {theirs * 1e6:>9.1f}us {floor * 1e6:>9.1f}us "
                  f"{ours / theirs:>7.2f}  {(ours - floor) * 1e6:>+10.1f} / {(theirs - floor) * 1e6:>+7.1f} us")
        if host:
            ours, theirs = host["pxla_mlir"], host["jax.pmap"]
            print(f"{name:<18} {'host in':<10} {ours * 1e6:>9.1f}us {theirs * 1e6:>9.1f}us {'':>11} "
                  f"{ours / theirs:>7.2f}")


if __name__ == "__main__":
    main()
