"""A pmap whose body is partitioned (``partitions={"model": 4}``) against
``jax.jit(jax.shard_map(..., axis_names={"data"}))`` with the same sharding
constraints, in one run on 8 virtual CPU devices (2 data x 4 model).

    python bench/bench_partitioned.py [--rounds 7] [--calls 100]

The program: one training step of a 2-layer MLP (tanh hidden layer, the
weights split over "model" by constraints), data parallel over "data" (each
index a batch of 64 examples; the gradients pmean'd over "data"), the update
inside. Compile: trace, lower and compile of the first call. Step: the
median of ``--rounds`` rounds of ``--calls`` blocked steps each, inputs on
the devices. Ratios are ours / jax.
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
from jax.sharding import Mesh, PartitionSpec as P

import pxla_mlir

W1, W2 = P(None, "model"), P("model", None)


def step(x, y, w1, w2):
    def loss(w1, w2):
        h = lax.with_sharding_constraint(jnp.tanh(x @ w1), P(None, "model"))
        return jnp.mean((h @ w2 - y) ** 2)

    value, (g1, g2) = jax.value_and_grad(loss, argnums=(0, 1))(w1, w2)
    g1, g2 = lax.pmean(g1, "data"), lax.pmean(g2, "data")
    new1 = lax.with_sharding_constraint(w1 - 0.05 * g1, W1)
    new2 = lax.with_sharding_constraint(w2 - 0.05 * g2, W2)
    return new1, new2, lax.pmean(value, "data")


def ours(shardings: str):
    return pxla_mlir.pmap(step, "data", in_axes=(0, 0, None, None), out_axes=(None, None, None), mode="partition",
                          shardings=shardings, partitions={"model": 4}, in_partitions=(P(), P(), W1, W2),
                          out_partitions=(W1, W2, P()))


def theirs():
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("data", "model"))
    return jax.jit(jax.shard_map(lambda x, y, w1, w2: step(x[0], y[0], w1, w2), mesh=mesh,
                                 in_specs=(P("data"), P("data"), P(), P()), out_specs=(P(), P(), P()),
                                 axis_names={"data"}, check_vma=False))  # pmap's grad: no implicit psum


def timed(fn, args, rounds: int, calls: int) -> tuple[float, float]:
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    first = time.perf_counter() - start
    per_call = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            jax.block_until_ready(fn(*args))
        per_call.append((time.perf_counter() - start) / calls)
    return first, statistics.median(per_call)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 64, 64)).astype(np.float32)
    y = rng.normal(size=(2, 64, 16)).astype(np.float32)
    w1 = (rng.normal(size=(64, 256)) * 0.1).astype(np.float32)
    w2 = (rng.normal(size=(256, 16)) * 0.1).astype(np.float32)
    ref_fn = theirs()
    ref = ref_fn(x, y, w1, w2)
    rows = []
    for shardings in ("sdy", "gspmd"):
        fn = ours(shardings)
        got = fn(x, y, w1, w2)
        for a, b in zip(got, ref):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-6)
        rows.append((f"pmap(partitions=) {shardings}", fn))
    device_args = [jax.device_put(a) for a in (x, y, w1, w2)]
    results = [("jax.jit(shard_map, axis_names={'data'})", *timed(theirs(), device_args, args.rounds, args.calls))]
    results += [(name, *timed(fn.with_options(), device_args, args.rounds, args.calls)) for name, fn in rows]
    base_first, base_step = results[0][1], results[0][2]
    print(f"2 data x 4 model MLP step on 8 CPU devices (median of {args.rounds} rounds of {args.calls} steps)")
    print(f"  {'':<42}{'compile+first':>14}{'ratio':>8}{'step':>12}{'ratio':>8}")
    for name, first, per in results:
        print(f"  {name:<42}{first * 1e3:11.1f} ms{first / base_first:8.2f}{per * 1e6:9.1f} us{per / base_step:8.2f}")


if __name__ == "__main__":
    main()
