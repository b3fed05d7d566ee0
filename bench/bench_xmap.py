"""pxla_mlir.xmap (three lowerings) against the equivalent jax.shard_map of
jax 0.10.2, measured in one run on 8 virtual CPU devices.

    python bench/bench_xmap.py [--rounds 7] [--calls 200]

The program: a batch of 64 rows over mesh axis x (8 devices), centered by
the batch mean and scaled by a broadcast weight. xmap names the batch axis;
shard_map writes the same math on per-device blocks. Then a data-parallel
training step (2-layer MLP, 128 examples over 8 devices; loss, grad of the
xmapped loss, update): ``pxla_mlir.jit`` of the step in each lowering, and
the step run eagerly (grad makes a forward and a backward xmap program),
against ``jax.jit`` of the same step whose loss is a ``jax.shard_map``.
Ratios are ours / jax.
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
from jax.sharding import Mesh as JaxMesh, NamedSharding, PartitionSpec as P

import pxla_mlir
from pxla_mlir.mlir.support.lru import clear_all


def per_row(a, w):  # xmap: one row, 'batch' named
    return jnp.tanh((a - lax.pmean(a, "batch")) * w)


def per_block(a, w):  # shard_map: a block of rows on one device
    mean = lax.pmean(jnp.mean(a, axis=0, keepdims=True), "x")
    return jnp.tanh((a - mean) * w)


def mse(params, x, y):
    w1, w2 = params
    return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)


def xmap_step(lowering):
    """Params broadcast, one example per element of 'batch' (on mesh axis x)."""
    loss = pxla_mlir.xmap(lambda p, a, b: lax.pmean(mse(p, a, b), "batch"), ({}, ["batch", ...], ["batch", ...]), {},
                          axis_resources={"batch": "x"}, lowering=lowering)
    return _update(loss)


def shard_map_step(jmesh):
    loss = jax.shard_map(lambda p, a, b: lax.pmean(mse(p, a, b), "x"), mesh=jmesh, in_specs=(P(), P("x"), P("x")),
                         out_specs=P())
    return _update(loss)


def _update(loss):
    def step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - 0.05 * g, params, grads), value

    return step


def training(mesh, jmesh, rounds: int, calls: int) -> None:
    rng = np.random.default_rng(1)
    params = (rng.normal(size=(32, 64)).astype(np.float32) * 0.2, rng.normal(size=(64, 4)).astype(np.float32) * 0.2)
    x, y = rng.normal(size=(128, 32)).astype(np.float32), rng.normal(size=(128, 4)).astype(np.float32)

    def first_call(make):
        def run():
            jax.block_until_ready(make()(params, x, y))
        return median(run, rounds, cold=True)

    def steps(make):
        step = make()
        box = [step(params, x, y)[0]]

        def run():
            for _ in range(calls):
                box[0], value = step(box[0], x, y)
                jax.block_until_ready(value)
        return median(run, rounds) / calls, box[0]

    theirs_cold = first_call(lambda: jax.jit(shard_map_step(jmesh)))
    theirs_step, theirs_params = steps(lambda: jax.jit(shard_map_step(jmesh)))
    print("\ndata-parallel training step (2-layer MLP, 128 examples over 8 devices), grad of the xmapped loss "
          "against jax.jit of the same step with jax.shard_map:")
    print(f"{'variant':<26} {'measure':<22} {'pxla_mlir':>12} {'shard_map':>12} {'ratio':>7}")
    variants = [(f"jit(grad(xmap)) {lowering}", lambda lowering=lowering: pxla_mlir.jit(xmap_step(lowering)))
                for lowering in ("replica", "manual", "vectorize")]
    variants.append(("grad(xmap), eager", lambda: xmap_step("replica")))
    with mesh:
        for name, make in variants:
            cold = first_call(make)
            step, ours_params = steps(make)
            drift = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                        for a, b in zip(jax.tree.leaves(ours_params), jax.tree.leaves(theirs_params)))
            print(f"{name:<26} {'first call (cold)':<22} {cold * 1e3:>9.1f} ms {theirs_cold * 1e3:>9.1f} ms "
                  f"{cold / theirs_cold:>7.2f}")
            print(f"{'':<26} {'step, params on device':<22} {step * 1e6:>9.1f} us {theirs_step * 1e6:>9.1f} us "
                  f"{step / theirs_step:>7.2f}   (params after {rounds * calls + 1} steps differ by {drift:.1e})")


def median(fn, rounds, cold=False):
    times = []
    for _ in range(rounds):
        if cold:
            jax.clear_caches()
            clear_all()  # pxla_mlir's caches of traced, transformed and compiled bodies
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=200)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(64, 128)).astype(np.float32), rng.normal(size=(128,)).astype(np.float32)
    mesh = pxla_mlir.Mesh.create({"x": 8})
    jmesh = JaxMesh(mesh.devices, ("x",))

    def shard_map_fn():
        return jax.jit(jax.shard_map(lambda a, v: per_block(a, v), mesh=jmesh, in_specs=(P("x"), P()),
                                     out_specs=P("x")))

    def xmap_fn(lowering):
        return pxla_mlir.xmap(lambda a, v: per_row(a, v), (["batch", ...], {}), ["batch", ...],
                              axis_resources={"batch": "x"}, lowering=lowering)

    jax_lower = median(lambda: shard_map_fn().lower(x, w), args.rounds, cold=True)
    jfn = shard_map_fn()
    x_dev = jax.device_put(x, NamedSharding(jmesh, P("x")))
    jax.block_until_ready(jfn(x, w))

    def per_call(fn, *a):
        def run():
            for _ in range(args.calls):
                jax.block_until_ready(fn(*a))
        return median(run, args.rounds) / args.calls

    jax_host, jax_dev = per_call(jfn, x, w), per_call(jfn, x_dev, w)
    print(f"jax {jax.__version__}, {len(jax.devices())} devices, {os.cpu_count()} cores; medians of {args.rounds}\n")
    print(f"{'lowering':<10} {'measure':<22} {'pxla_mlir':>12} {'shard_map':>12} {'ratio':>7}")
    with mesh:
        for lowering in ("replica", "manual", "vectorize"):
            ours_lower = median(lambda: xmap_fn(lowering).lower(x, w), args.rounds, cold=True)
            f = xmap_fn(lowering)
            out = f(x, w)
            np.testing.assert_allclose(np.asarray(out), np.asarray(jfn(x, w)), rtol=1e-4, atol=1e-5)
            rows = [("trace+lower", ours_lower, jax_lower, 1e3, "ms"),
                    ("call, host inputs", per_call(f, x, w), jax_host, 1e6, "us"),
                    ("call, device inputs", per_call(f, out, w), jax_dev, 1e6, "us")]
            for what, ours, theirs, scale, unit in rows:
                print(f"{lowering:<10} {what:<22} {ours * scale:>9.1f} {unit} {theirs * scale:>9.1f} {unit} "
                      f"{ours / theirs:>7.2f}")

    training(mesh, jmesh, args.rounds, max(1, args.calls // 4))


if __name__ == "__main__":
    main()
