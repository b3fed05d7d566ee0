"""Drop-in costs of pxla_mlir.pmap against jax.pmap (jax 0.10.2), on 8
virtual CPU devices, measured interleaved in one run.

    python bench/bench_dropin.py [--rounds 7] [--calls 50]

* fresh object per call: ``pmap(f)(x)`` with a new pmap object every
  iteration (scripts and libraries that build the pmap inside a function);
  the objects share one cache, so only the first ever traces and compiles;
* jit(pmap) step: ``jax.jit`` of a data-parallel training step (forward,
  grad, pmean of gradients, update) written with the pmap inside, against
  ``jax.jit`` of the same step with jax.pmap: both are one program over the
  8 devices; per blocked call, and the first call (trace, lower, compile).
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import pxla_mlir
from pxla_mlir.mlir.support import lru


def body(x):
    return lax.psum(jnp.tanh(x) * 2, "i")


def fresh_object_calls(pmap, x, calls: int) -> float:
    """Mean seconds per blocked call, each through a new pmap object."""
    t = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(pmap(body, "i")(x))
    return (time.perf_counter() - t) / calls


def step_for(pmap):
    def loss(w, x, y):
        return jnp.mean((jnp.tanh(x @ w) - y) ** 2)

    grads = pmap(lambda w, x, y: lax.pmean(jax.grad(loss)(w, x, y), "i"), "i", in_axes=(None, 0, 0))

    def step(w, x, y):
        return w - 0.1 * grads(w, x, y)[0]

    return jax.jit(step)


def blocked_calls(fn, args, calls: int) -> float:
    t = time.perf_counter()
    for _ in range(calls):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - t) / calls


def first_call(make, args) -> float:
    t = time.perf_counter()
    jax.block_until_ready(make()(*args))
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=50)
    args = ap.parse_args()
    print(f"jax {jax.__version__}, {len(jax.devices())} {jax.devices()[0].platform} devices, {os.cpu_count()} cores; "
          f"medians of {args.rounds} interleaved rounds of {args.calls} calls; "
          f"load average {os.getloadavg()[0]:.2f}\n")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 64)).astype(np.float32)
    w = rng.normal(size=(64, 32)).astype(np.float32) / 8
    xs, ys = rng.normal(size=(8, 16, 64)).astype(np.float32), rng.normal(size=(8, 16, 32)).astype(np.float32)
    sides = {"pxla_mlir": pxla_mlir.pmap, "jax.pmap": jax.pmap}

    # The very first call of each (trace, lower, compile), before anything is cached.
    first = {side: first_call(lambda p=p: p(body, "i"), (x,)) for side, p in sides.items()}
    fresh = {side: [] for side in sides}
    steps = {side: step_for(p) for side, p in sides.items()}
    step_first = {side: first_call(lambda s=s: s, (w, xs, ys)) for side, s in steps.items()}
    step_calls = {side: [] for side in sides}
    for _ in range(args.rounds):  # each case in its own interleaved rounds: one cannot slow the other down
        for side, p in sides.items():
            fresh[side].append(fresh_object_calls(p, x, args.calls))
    for _ in range(args.rounds):
        for side in sides:
            step_calls[side].append(blocked_calls(steps[side], (w, xs, ys), args.calls))
    med = {name: {s: statistics.median(v) for s, v in table.items()} for name, table in
           (("fresh", fresh), ("step", step_calls))}
    np.testing.assert_allclose(steps["pxla_mlir"](w, xs, ys), steps["jax.pmap"](w, xs, ys), rtol=1e-6)

    print(f"{'case':<34} {'pxla_mlir':>11} {'jax.pmap':>11} {'ratio':>7}")
    rows = [("fresh pmap(f) object: first call", first, 1e3, "ms"),
            ("fresh pmap(f) object: later calls", med["fresh"], 1e6, "us"),
            ("jax.jit(pmap) step: first call", step_first, 1e3, "ms"),
            ("jax.jit(pmap) step: blocked call", med["step"], 1e6, "us")]
    for name, values, scale, unit in rows:
        ours, theirs = values["pxla_mlir"], values["jax.pmap"]
        print(f"{name:<34} {ours * scale:>9.1f}{unit} {theirs * scale:>9.1f}{unit} {ours / theirs:>7.2f}")
    text = steps["pxla_mlir"].lower(w, xs, ys).as_text()
    print(f"\njax.jit(pmap) step program: mhlo.num_partitions = {text.split('mhlo.num_partitions = ')[1].split()[0]}, "
          f"{text.count('sdy.manual_computation')} manual computation(s)")
    lru.clear_all()


if __name__ == "__main__":
    main()
