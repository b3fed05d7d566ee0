"""pxla_mlir.pmap against jax.pmap (jax 0.10.2), measured in one run on 8
virtual CPU devices.

    python bench/bench_pmap.py [--rounds 7] [--calls 200]

For each program: trace+lower time (ours includes the pass pipeline),
compile time, and blocked per-call latency with host (numpy) and
device-resident inputs; ratios are ours / jax (lower is better). Then a
data-parallel training step (forward, grad, pmean of gradients, update)
written twice: grad inside the pmap, and jit of grad of a pmapped loss.
Then the cost of the in-flight window that prevents XLA:CPU's collective
deadlock.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import argparse
import statistics
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import pxla_mlir


def tiny(x):
    return lax.psum(x * 2, "i")


def mlp(params, x):
    w1, w2 = params
    h = jax.nn.relu(x @ w1)
    logits = h @ w2
    return lax.pmean(jnp.mean(logits, axis=0), "i"), logits


def chain200(x):
    for k in range(200):
        x = jnp.sin(x) * 1.001 + 0.5 if k % 2 else jnp.cos(x) - 0.25
        if k % 50 == 49:
            x = lax.psum(x, "i") / 8
    return x


def programs():
    rng = np.random.default_rng(0)
    f32 = np.float32
    return {
        "tiny psum": (tiny, 0, (rng.normal(size=(8, 16)).astype(f32),)),
        "small MLP": (mlp, (None, 0), ((rng.normal(size=(32, 64)).astype(f32), rng.normal(size=(64, 10)).astype(f32)),
                                       rng.normal(size=(8, 16, 32)).astype(f32))),
        "200 ops, 4 psums": (chain200, 0, (rng.normal(size=(8, 64)).astype(f32),)),
    }


def median_seconds(fn, rounds: int, cold: bool = False) -> float:
    times = []
    for _ in range(rounds):
        if cold:
            jax.clear_caches()  # no tracing, lowering or compilation cache hits
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def per_call(fn, arg_sets, calls: int, rounds: int) -> float:
    def run():
        for _ in range(calls):
            jax.block_until_ready(fn(*arg_sets))
    return median_seconds(run, rounds) / calls


def measure(name, fn, in_axes, args, rounds, calls):
    # New function objects every time, so neither side reuses a trace.
    ours_new = lambda: pxla_mlir.pmap(lambda *a: fn(*a), "i", in_axes=in_axes)  # noqa: E731
    jax_new = lambda: jax.pmap(lambda *a: fn(*a), "i", in_axes=in_axes)  # noqa: E731
    row = {}
    row["trace+lower"] = (median_seconds(lambda: ours_new().lower(*args), rounds, cold=True),
                          median_seconds(lambda: jax_new().lower(*args), rounds, cold=True))

    def compile_only(make):
        times = []
        for _ in range(rounds):
            lowered = make().lower(*args)
            jax.clear_caches()
            t = time.perf_counter()
            lowered.compile()
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    row["compile"] = (compile_only(ours_new), compile_only(jax_new))
    ours, theirs = ours_new(), jax_new()
    jax.block_until_ready((ours(*args), theirs(*args)))
    row["call, host inputs"] = (per_call(ours, args, calls, rounds), per_call(theirs, args, calls, rounds))
    ours_dev = jax.tree.map(lambda a, ax: ours_put(a, ax), args, _axes_tree(in_axes, args))
    theirs_dev = jax.tree.map(lambda a, ax: theirs_put(a, ax), args, _axes_tree(in_axes, args))
    row["call, device inputs"] = (per_call(ours, ours_dev, calls, rounds),
                                  per_call(theirs, theirs_dev, calls, rounds))
    return row


def _axes_tree(in_axes, args):
    if isinstance(in_axes, tuple):
        return tuple(jax.tree.map(lambda _: a, x) for a, x in zip(in_axes, args))
    return jax.tree.map(lambda _: in_axes, args)


def ours_put(a, axis):
    # A pmap output is resident exactly where the next call wants it.
    return a if axis is None else pxla_mlir.pmap(lambda v: v, in_axes=axis, out_axes=axis)(a)


def theirs_put(a, axis):
    return a if axis is None else jax.pmap(lambda v: v, in_axes=axis, out_axes=axis)(a)


def mse(params, x, y):
    w1, w2 = params
    return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)


def step_grad_inside(pmap):
    """Classic data parallelism: replicated params stacked on axis 0."""
    def step(params, x, y):
        loss, grads = jax.value_and_grad(mse)(params, x, y)
        grads = lax.pmean(grads, "i")
        return jax.tree.map(lambda p, g: p - 0.05 * g, params, grads), lax.pmean(loss, "i")

    return pmap(step, "i")


def step_grad_outside(pmap, jit):
    """The pmap is differentiated from outside; params enter broadcast."""
    def loss(params, x, y):
        return jnp.mean(pmap(lambda p, a, b: lax.pmean(mse(p, a, b), "i"), "i", in_axes=(None, 0, 0))(params, x, y))

    def step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - 0.05 * g, params, grads), value

    return jit(step)


def training_data():
    rng = np.random.default_rng(1)
    params = (rng.normal(size=(32, 64)).astype(np.float32) * 0.2, rng.normal(size=(64, 4)).astype(np.float32) * 0.2)
    return params, rng.normal(size=(8, 16, 32)).astype(np.float32), rng.normal(size=(8, 16, 4)).astype(np.float32)


def measure_training(make_ours, make_theirs, stacked: bool, rounds: int, calls: int):
    params, x, y = training_data()
    if stacked:
        params = jax.tree.map(lambda p: np.broadcast_to(p, (8, *p.shape)).copy(), params)

    def first_call(make):
        def run():
            jax.block_until_ready(make()(params, x, y))
        return median_seconds(run, rounds, cold=True)

    def steps(make):
        step = make()
        state = step(params, x, y)[0]
        state_box = [state]

        def run():
            for _ in range(calls):
                state_box[0], loss = step(state_box[0], x, y)
                jax.block_until_ready(loss)
        return median_seconds(run, rounds) / calls, state_box[0]

    ours_step, ours_state = steps(make_ours)
    theirs_step, theirs_state = steps(make_theirs)
    drift = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                for a, b in zip(jax.tree.leaves(ours_state), jax.tree.leaves(theirs_state)))
    return {"first call (cold)": (first_call(make_ours), first_call(make_theirs)),
            "step, params on device": (ours_step, theirs_step)}, drift


def training_rows(rounds: int, calls: int):
    yield "grad inside pmap", measure_training(lambda: step_grad_inside(pxla_mlir.pmap),
                                               lambda: step_grad_inside(jax.pmap), True, rounds, calls)
    yield "jit(grad(pmap))", measure_training(lambda: step_grad_outside(pxla_mlir.pmap, pxla_mlir.jit),
                                              lambda: step_grad_outside(jax.pmap, jax.jit), False, rounds, calls)


def print_row(name, what, ours, theirs):
    unit, scale = ("ms", 1e3) if what in ("trace+lower", "compile", "first call (cold)") else ("us", 1e6)
    print(f"{name:<18} {what:<22} {ours * scale:>9.1f} {unit} {theirs * scale:>9.1f} {unit} {ours / theirs:>7.2f}")


UNBLOCKED = """
import os, sys, time
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np, jax
from jax import lax
which, window = sys.argv[1], int(sys.argv[2])
if which == "ours":
    import pxla_mlir
    from pxla_mlir.runtime import inflight
    inflight.INFLIGHT_WINDOW = window
    f = pxla_mlir.pmap(lambda v: lax.psum(v, "i") / 8, "i")
else:
    f = jax.pmap(lambda v: lax.psum(v, "i") / 8, "i")
y = f(np.ones((8, 16), np.float32)); y.block_until_ready()
t = time.perf_counter()
for _ in range(1000):
    y = f(y)
y.block_until_ready()
print((time.perf_counter() - t) / 1000 * 1e6)
"""


def unblocked(which: str, window: int, nproc: int | None) -> str:
    env = dict(os.environ)
    if nproc:
        env["PJRT_NPROC"] = str(nproc)
    try:
        p = subprocess.run([sys.executable, "-c", UNBLOCKED, which, str(window)], capture_output=True, text=True,
                           timeout=150, env=env)
    except subprocess.TimeoutExpired:
        return "hung (killed after 150 s)"
    if p.returncode != 0:
        return f"died (exit {p.returncode}: XLA:CPU collective rendezvous abort)" if p.returncode < 0 or \
            "rendezvous" in p.stderr else f"failed (exit {p.returncode})"
    return f"{float(p.stdout.strip()):.0f} us/call"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--skip-unblocked", action="store_true")
    args = ap.parse_args()
    print(f"jax {jax.__version__}, {len(jax.devices())} {jax.devices()[0].platform} devices, "
          f"{os.cpu_count()} cores; medians of {args.rounds} rounds\n")
    print(f"{'program':<18} {'measure':<22} {'pxla_mlir':>12} {'jax.pmap':>12} {'ratio':>7}")
    for name, (fn, in_axes, fargs) in programs().items():
        for what, (ours, theirs) in measure(name, fn, in_axes, fargs, args.rounds, args.calls).items():
            print_row(name, what, ours, theirs)
    print("\ndata-parallel training step (2-layer MLP, 8 x 16 examples), same program both sides:")
    for name, (rows, drift) in training_rows(args.rounds, args.calls):
        for what, (ours, theirs) in rows.items():
            print_row(name, what, ours, theirs)
        print(f"{name:<18} {'max |params diff|':<22} {drift:>12.1e} after {args.rounds * args.calls + 1} steps")
    if args.skip_unblocked:
        return
    print("\n1000 un-blocked calls of a pmapped psum (chained), per call:")
    print(f"  pxla_mlir, window 8 (default)            {unblocked('ours', 8, None)}")
    print(f"  pxla_mlir, window 1 (block every call)   {unblocked('ours', 1, None)}")
    print(f"  pxla_mlir, unbounded, PJRT_NPROC=16      {unblocked('ours', 10**9, 16)}")
    print(f"  jax.pmap, unbounded, PJRT_NPROC=16       {unblocked('jax', 0, 16)}")
    print(f"  jax.pmap, unbounded (default)            {unblocked('jax', 0, None)}")


if __name__ == "__main__":
    main()
