"""Representative data-parallel training steps, written here with plain jax,
each run through pxla_mlir and jax 0.10.2 on 8 virtual CPU devices,
interleaved in one run.

    python bench/bench_training.py [--rounds 7] [--steps 10] [--models transformer,resnet,xmap]
                                   [--layers 2] [--skip-hlo]

- transformer (pxla_mlir.pmap against jax.pmap): token embedding,
  ``--layers`` (2) pre-norm blocks of 4-head self-attention and an MLP with
  layer norm and dropout, next-token cross entropy; the dropout key of each
  device is ``fold_in(key, axis_index)``; gradients pmean'd over the pmap
  axis; an Adam update.
- resnet (pxla_mlir.pmap against jax.pmap): 3x3 convolutions, ``--layers``
  (2) residual blocks, batch norm whose batch statistics are pmean'd over the
  pmap axis (``axis_name``) with running averages in the state; gradients
  pmean'd; SGD with momentum.
- xmap: bench_xmap.py's MLP step, ``pxla_mlir.jit(grad(xmap))`` against
  ``jax.jit`` of the step written with ``jax.shard_map`` (target: <= 1.0).

Per model: the first step (trace, lower, compile, run; fresh function
objects and cleared caches, sides alternating), the second step (the first
with the state on the devices: jax.pmap compiles again there) and the
steady step (``--steps`` blocked steps per round, sides alternating),
medians of ``--rounds``; ratios are pxla_mlir / jax (target for the pmap
steps' steady step: <= 0.95). After all rounds both sides have run the same
number of steps from the same state: the bench asserts the states agree, bit
for bit where both sides run one program (the pmap steps; the xmap step's
two programs sum in different orders: float tolerance). Last, the optimized
HLO of both sides (``.lower(...).compile().as_text()``) compared
instruction by instruction (result type and opcode), which tells whether a
difference in step time comes from the program or from dispatch.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import argparse
import collections
import contextlib
import dataclasses
import re
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh as JaxMesh

import pxla_mlir
from pxla_mlir.mlir.support.lru import clear_all

DEVICES = 8
AXIS = "i"


# ---------------------------------------------------------------- transformer
VOCAB, SEQ, WIDTH, HEADS, HIDDEN, BATCH = 64, 16, 32, 4, 64, 4  # BATCH: sequences per device
DROPOUT = 0.1


def layer_norm(p, x):
    mean = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, -1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * p["scale"] + p["bias"]


def dropout(key, x):
    keep = jax.random.bernoulli(key, 1 - DROPOUT, x.shape)
    return jnp.where(keep, x / (1 - DROPOUT), 0)


def attention(p, x):
    b, s, _ = x.shape
    q, k, v = (jnp.einsum("bsd,dhk->bhsk", x, p[n]) for n in ("q", "k", "v"))
    logits = jnp.einsum("bhqk,bhsk->bhqs", q, k) / np.sqrt(WIDTH // HEADS)
    causal = jnp.tril(jnp.ones((s, s), bool))
    weights = jax.nn.softmax(jnp.where(causal, logits, -1e9), axis=-1)
    return jnp.einsum("bhqs,bhsk,hkd->bqd", weights, v, p["o"])


def transformer_loss(params, tokens, key):
    x = params["embed"][tokens[:, :-1]] + params["pos"]
    for n, block in enumerate(params["blocks"]):
        k1, k2 = jax.random.split(jax.random.fold_in(key, n))
        x = x + dropout(k1, attention(block["attn"], layer_norm(block["ln1"], x)))
        h = jax.nn.gelu(layer_norm(block["ln2"], x) @ block["w1"]) @ block["w2"]
        x = x + dropout(k2, h)
    logits = layer_norm(params["ln"], x) @ params["embed"].T
    labels = jax.nn.one_hot(tokens[:, 1:], VOCAB)
    return -jnp.mean(jnp.sum(labels * jax.nn.log_softmax(logits), -1))


def adam(params, grads, opt, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    t = opt["t"] + 1
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, opt["m"], grads)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * g * g, opt["v"], grads)
    fix1, fix2 = 1 - b1 ** t.astype(jnp.float32), 1 - b2 ** t.astype(jnp.float32)
    params = jax.tree.map(lambda p, m, v: p - lr * (m / fix1) / (jnp.sqrt(v / fix2) + eps), params, m, v)
    return params, {"t": t, "m": m, "v": v}


def transformer_step(state, tokens):
    params, opt, key = state
    device_key = jax.random.fold_in(key, lax.axis_index(AXIS))
    loss, grads = jax.value_and_grad(transformer_loss)(params, tokens, device_key)
    grads = lax.pmean(grads, AXIS)
    params, opt = adam(params, grads, opt)
    return (params, opt, jax.random.fold_in(key, opt["t"])), lax.pmean(loss, AXIS)


def transformer_init(rng, layers: int):
    def dense(*shape, scale=0.1):
        return (rng.normal(size=shape) * scale).astype(np.float32)

    def norm():
        return {"scale": np.ones(WIDTH, np.float32), "bias": np.zeros(WIDTH, np.float32)}

    head = WIDTH // HEADS
    blocks = [{"ln1": norm(), "ln2": norm(), "w1": dense(WIDTH, HIDDEN), "w2": dense(HIDDEN, WIDTH),
               "attn": {"q": dense(WIDTH, HEADS, head), "k": dense(WIDTH, HEADS, head),
                        "v": dense(WIDTH, HEADS, head), "o": dense(HEADS, head, WIDTH)}}
              for _ in range(layers)]
    params = {"embed": dense(VOCAB, WIDTH), "pos": dense(SEQ - 1, WIDTH), "ln": norm(), "blocks": blocks}
    zeros = jax.tree.map(np.zeros_like, params)
    opt = {"t": np.zeros((), np.int32), "m": zeros, "v": jax.tree.map(np.copy, zeros)}
    state = (params, opt, np.asarray(jax.random.key_data(jax.random.key(0))))
    batch = rng.integers(0, VOCAB, size=(DEVICES, BATCH, SEQ)).astype(np.int32)
    return state, batch


def transformer_step_raw_key(state, tokens):
    params, opt, key = state  # the key travels as its uint32 data: both pmaps take it the same way
    (params, opt, key), loss = transformer_step((params, opt, jax.random.wrap_key_data(key)), tokens)
    return (params, opt, jax.random.key_data(key)), loss


# --------------------------------------------------------------------- resnet
IMAGE, CHANNELS, CLASSES, IMAGES = 16, 16, 10, 8  # IMAGES: per device


def conv(w, x, stride=1):
    return lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def batch_norm(p, stats, x, momentum=0.9):
    """Batch statistics over the global batch: the per-device moments pmean'd over the pmap axis."""
    mean = lax.pmean(jnp.mean(x, (0, 1, 2)), AXIS)
    var = lax.pmean(jnp.mean(x * x, (0, 1, 2)), AXIS) - mean * mean
    y = (x - mean) * lax.rsqrt(var + 1e-5) * p["scale"] + p["bias"]
    new = {"mean": momentum * stats["mean"] + (1 - momentum) * lax.stop_gradient(mean),
           "var": momentum * stats["var"] + (1 - momentum) * lax.stop_gradient(var)}
    return y, new


def resnet_loss(params, stats, images, labels):
    new_stats = {}
    x, new_stats["stem"] = batch_norm(params["stem_bn"], stats["stem"], conv(params["stem"], images))
    x = jax.nn.relu(x)
    for n, block in enumerate(params["blocks"]):
        h, s1 = batch_norm(block["bn1"], stats[f"b{n}_1"], conv(block["c1"], x))
        h, s2 = batch_norm(block["bn2"], stats[f"b{n}_2"], conv(block["c2"], jax.nn.relu(h)))
        new_stats[f"b{n}_1"], new_stats[f"b{n}_2"] = s1, s2
        x = jax.nn.relu(x + h)
    logits = jnp.mean(x, (1, 2)) @ params["head"]
    loss = -jnp.mean(jnp.sum(jax.nn.one_hot(labels, CLASSES) * jax.nn.log_softmax(logits), -1))
    return loss, new_stats


def resnet_step(state, images, labels):
    params, stats, momentum = state
    (loss, stats), grads = jax.value_and_grad(resnet_loss, has_aux=True)(params, stats, images, labels)
    grads = lax.pmean(grads, AXIS)
    momentum = jax.tree.map(lambda m, g: 0.9 * m + g, momentum, grads)
    params = jax.tree.map(lambda p, m: p - 0.05 * m, params, momentum)
    return (params, stats, momentum), lax.pmean(loss, AXIS)


def resnet_init(rng, blocks: int):
    def w(*shape):
        return (rng.normal(size=shape) * np.sqrt(2 / np.prod(shape[:-1]))).astype(np.float32)

    def bn():
        return {"scale": np.ones(CHANNELS, np.float32), "bias": np.zeros(CHANNELS, np.float32)}

    def stat():
        return {"mean": np.zeros(CHANNELS, np.float32), "var": np.ones(CHANNELS, np.float32)}

    params = {"stem": w(3, 3, 3, CHANNELS), "stem_bn": bn(), "head": w(CHANNELS, CLASSES),
              "blocks": [{"c1": w(3, 3, CHANNELS, CHANNELS), "bn1": bn(), "c2": w(3, 3, CHANNELS, CHANNELS),
                          "bn2": bn()} for _ in range(blocks)]}
    stats = {"stem": stat(), **{f"b{n}_{k}": stat() for n in range(blocks) for k in (1, 2)}}
    state = (params, stats, jax.tree.map(np.zeros_like, params))
    images = rng.normal(size=(DEVICES, IMAGES, IMAGE, IMAGE, 3)).astype(np.float32)
    labels = rng.integers(0, CLASSES, size=(DEVICES, IMAGES)).astype(np.int32)
    return state, images, labels


# ---------------------------------------------------------------------- bench
@dataclasses.dataclass
class Model:
    name: str
    reference: str  # the jax side
    makers: dict  # side -> a fresh step function, (state, *data) -> (state, loss)
    state: object
    data: tuple
    exact: bool = True  # both sides run the same program: the states must agree bit for bit
    context: object = dataclasses.field(default_factory=contextlib.nullcontext)


def pmapped(step) -> dict:
    return {"pxla_mlir": lambda: pxla_mlir.pmap(lambda s, *d: step(s, *d), AXIS),
            "jax": lambda: jax.pmap(lambda s, *d: step(s, *d), AXIS)}


def xmap_mlp():
    """bench_xmap.py's data-parallel MLP step: jit(grad(xmap)) against jax.jit(shard_map)."""
    import bench_xmap

    mesh = pxla_mlir.Mesh.create({"x": DEVICES})
    jmesh = JaxMesh(mesh.devices, ("x",))
    rng = np.random.default_rng(1)
    params = (rng.normal(size=(32, 64)).astype(np.float32) * 0.2, rng.normal(size=(64, 4)).astype(np.float32) * 0.2)
    x, y = rng.normal(size=(128, 32)).astype(np.float32), rng.normal(size=(128, 4)).astype(np.float32)
    makers = {"pxla_mlir": lambda: pxla_mlir.jit(bench_xmap.xmap_step("replica")),
              "jax": lambda: jax.jit(bench_xmap.shard_map_step(jmesh))}
    # Not one program: xmap sums per-example weight gradients, shard_map's block matmul contracts the batch.
    return Model("xmap", "jax.jit(shard_map)", makers, params, (x, y), exact=False, context=mesh)


def models(layers: int):
    rng = np.random.default_rng(0)
    state, tokens = transformer_init(rng, layers)
    yield Model("transformer", "jax.pmap", pmapped(transformer_step_raw_key), replicate(state), (tokens,))
    state, images, labels = resnet_init(rng, layers)
    yield Model("resnet", "jax.pmap", pmapped(resnet_step), replicate(state), (images, labels))
    yield xmap_mlp()


def replicate(state):
    return jax.tree.map(lambda a: np.broadcast_to(a, (DEVICES, *np.shape(a))).copy(), state)


SIDES = ("pxla_mlir", "jax")


def first_steps(model: Model, rounds: int) -> tuple[dict, dict]:
    """Median seconds of a first call (trace, lower, compile, run) of a fresh
    step function, sides alternating; and the functions of the last round (compiled)."""
    times, fns = collections.defaultdict(list), {}
    for r in range(rounds):
        for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
            jax.clear_caches()
            clear_all()
            fns[side] = model.makers[side]()
            t = time.perf_counter()
            jax.block_until_ready(fns[side](model.state, *model.data))
            times[side].append(time.perf_counter() - t)
    return {side: statistics.median(ts) for side, ts in times.items()}, fns


def steady_steps(fns, model: Model, rounds: int, steps: int) -> tuple[dict, dict, dict]:
    """Seconds of the second step (the first with the state on the devices)
    and the median seconds per blocked step after it, sides alternating; and
    each side's state after the same number of steps."""
    states, second = {}, {}
    for side, fn in fns.items():
        states[side], loss = fn(model.state, *model.data)  # compiled already, state now device-resident
        jax.block_until_ready(loss)
        t = time.perf_counter()
        states[side], loss = fn(states[side], *model.data)
        jax.block_until_ready(loss)
        second[side] = time.perf_counter() - t
    times = collections.defaultdict(list)
    for r in range(rounds):
        for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
            fn, s = fns[side], states[side]
            t = time.perf_counter()
            for _ in range(steps):
                s, loss = fn(s, *model.data)
                jax.block_until_ready(loss)
            times[side].append((time.perf_counter() - t) / steps)
            states[side] = s
    return second, {side: statistics.median(ts) for side, ts in times.items()}, states


def compare_states(states: dict, exact: bool) -> str:
    """Asserts the states agree (bit for bit when both sides run one program); says how."""
    ours, theirs = (jax.tree.leaves(states[side]) for side in SIDES)
    assert len(ours) == len(theirs)
    drift = 0.0
    for n, (a, b) in enumerate(zip(ours, theirs)):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, (n, a.dtype, a.shape, b.dtype, b.shape)
        diff = float(np.max(np.abs(a.astype(np.float64) - b))) if a.size else 0.0
        if exact:
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), f"state leaf {n} differs: max |diff| {diff:.3e}"
        else:
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=f"state leaf {n}")
        drift = max(drift, diff)
    return f"{len(ours)} leaves bit-identical" if exact else f"{len(ours)} leaves, max |diff| {drift:.1e}"


#: One HLO instruction: its result type and opcode (names, operands and metadata differ between the sides).
INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%[\w.-]+ = (.+?) ([a-z][a-z0-9-]*)\(", re.M)


def hlo_difference(fns, model: Model) -> str:
    """What the optimized HLO of one side holds that the other's does not:
    instructions compared as a multiset of (result type, opcode), fusion
    bodies included."""
    held = {side: collections.Counter(INSTRUCTION.findall(fn.lower(model.state, *model.data).compile().as_text()))
            for side, fn in fns.items()}
    ours, theirs = held["pxla_mlir"], held["jax"]

    def show(c):
        return ", ".join(f"{n} x {op} {ty}" for (ty, op), n in sorted(c.items())[:8]) or "nothing"

    return (f"{sum(ours.values())} vs {sum(theirs.values())} instructions; only ours: {show(ours - theirs)}; "
            f"only jax's: {show(theirs - ours)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=10, help="blocked steps per round")
    ap.add_argument("--first-rounds", type=int, default=3, help="rounds of the first step")
    ap.add_argument("--models", default="transformer,resnet,xmap")
    ap.add_argument("--layers", type=int, default=2, help="transformer blocks / residual blocks")
    ap.add_argument("--skip-hlo", action="store_true", help="do not compare the optimized HLO of both sides")
    args = ap.parse_args()
    chosen = args.models.split(",")
    print(f"jax {jax.__version__}, {len(jax.devices())} {jax.devices()[0].platform} devices, {os.cpu_count()} cores; "
          f"medians of {args.rounds} rounds x {args.steps} steps (first step: {args.first_rounds} rounds)")
    for model in models(args.layers):
        if model.name not in chosen:
            continue
        print(f"\n{model.name + ':':<12} {'measure':<30} {'pxla_mlir':>12} {model.reference:>18} {'ratio':>7}")
        with model.context:
            first, fns = first_steps(model, args.first_rounds)
            second, steady, states = steady_steps(fns, model, args.rounds, args.steps)
            agreement = compare_states(states, model.exact)
            rows = (("first step (trace+compile+run)", first), ("second step (state on device)", second),
                    ("steady step", steady))
            for what, t in rows:
                ours, theirs = t["pxla_mlir"], t["jax"]
                print(f"{'':<12} {what:<30} {ours * 1e3:>9.2f} ms {theirs * 1e3:>15.2f} ms {ours / theirs:>7.2f}")
            print(f"{'':<12} {'state after ' + str(2 + args.rounds * args.steps) + ' steps':<30} {agreement}")
            if not args.skip_hlo:
                print(f"{'':<12} {'optimized HLO':<30} {hlo_difference(fns, model)}")

if __name__ == "__main__":
    main()
