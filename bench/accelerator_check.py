"""pxla_mlir against jax on whatever accelerator jax finds (TPU, GPU): one table.

    python bench/accelerator_check.py [--steps 100] [--quick]
    python bench/accelerator_check.py --cpu [--cpu-devices 4] [--quick]   # the same cases on CPU (CI)

Without an accelerator (jax's default backend is cpu) it prints one line
saying so and exits 0, unless ``--cpu`` is given. Map sizes are the
platform's device count (at most 8; 1 on a one-chip host).

Cases, each 'equal to jax' / 'differs (max abs err E)' / 'error: ...' (one
failing case never stops the table): flat pmap in replica mode; partition
mode with Shardy and with GSPMD shardings; xmap with each lowering; nested
pmaps with size-1 inner axes; a partitioned pmap (``partitions=``);
``pxla_mlir.jit`` of a pmap; ``jax.debug.callback`` inside a pmap; donation;
the persistent compilation cache written by one process and loaded by
another; ``pxla-mlir run`` and ``run --compare`` of modules emitted on CPU.
Then dispatch ratios (pxla_mlir / jax.pmap, median of cached calls: 1
device-array argument, 100 arguments, a host numpy argument) and a small
transformer training step (bf16 parameters, Adam written by hand, gradients
pmean'd, state donated) on both sides: the steady step time ratio, the first
step ratio (trace, lower, compile, run) in this process and in fresh
processes, cold and with the persistent cache filled by an earlier process
(a warm start), the largest parameter difference
after ``--steps`` steps from one state, and both sides' optimized HLO (lines,
fusions, all-reduces).

The cases that need processes of their own (the cache, the command line) run
first, before this process starts the accelerator: a TPU is held by one
process at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback

MAX_DEVICES = 8
CLI = "import sys; from pxla_mlir.tools.cli import main; sys.exit(main())"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu", action="store_true", help="run the cases on CPU devices (no accelerator needed)")
    p.add_argument("--cpu-devices", type=int, default=4, help="with --cpu: virtual CPU devices (default 4)")
    p.add_argument("--steps", type=int, default=100, help="training steps per side (default 100)")
    p.add_argument("--quick", action="store_true", help="small sizes and few repetitions (a smoke run)")
    p.add_argument("--blocks", type=int, default=1, help="transformer blocks of the training step (default 1)")
    p.add_argument("--width", type=int, default=128, help="model width of the training step (default 128)")
    p.add_argument("--hlo-dir", help="write both sides' optimized HLO of the training step here (to diff)")
    p.add_argument("--timeout", type=float, default=600, help="seconds for each child process (default 600)")
    args = p.parse_args(argv)
    if args.quick and args.steps == 100:
        args.steps = 4
    return args


# ---------------------------------------------------------------- the table

ROWS: list[tuple[str, str, str]] = []


def row(check: str, result: str, detail: str = "") -> None:
    ROWS.append((check, result, detail))


def compare(ours, theirs) -> str:
    import numpy as np

    a, b = np.asarray(ours), np.asarray(theirs)
    if a.shape != b.shape or a.dtype != b.dtype:
        return f"differs (shape/dtype {a.shape} {a.dtype} vs jax {b.shape} {b.dtype})"
    if np.array_equal(a, b, equal_nan=True):
        return "equal to jax"
    err = np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))
    return f"differs (max abs err {err:.3g})"


def error_text(e: BaseException) -> str:
    first = (str(e).strip().splitlines() or [""])[0]
    return f"error: {type(e).__name__}: {first[:160]}"


def case(name: str):
    """Runs the decorated function now; its return value (result[, detail]) becomes a row, an exception too."""
    def run(fn):
        try:
            out = fn()
            result, detail = out if isinstance(out, tuple) else (out, "")
        except Exception as e:  # noqa: BLE001 - a failing case is a row, not the end of the table
            result, detail = error_text(e), ""
            if os.environ.get("PXLA_DEBUG"):
                traceback.print_exc()
        row(name, result, detail)
        return fn
    return run


def print_table(platform: str, n: int) -> None:
    print(f"accelerator_check: {platform.upper()}, map size {n}")
    widths = [max(len(r[i]) for r in ROWS + [("check", "result", "detail")]) for i in range(3)]
    line = "  ".join("-" * w for w in widths)
    print(line)
    print("  ".join(h.ljust(w) for h, w in zip(("check", "result", "detail"), widths)).rstrip())
    print(line)
    for r in ROWS:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    print(line)


# ---------------------------------------------------------------- children (before this process starts jax)

CACHE_CHILD = textwrap.dedent("""
    import json, sys
    import jax, numpy as np
    from jax import lax
    import pxla_mlir
    hits = [0]
    jax.monitoring.register_event_listener(
        lambda name, **kw: hits.__setitem__(0, hits[0] + (name == "/jax/compilation_cache/cache_hits")))
    n = min(len(jax.devices()), int(sys.argv[1]))
    x = np.arange(n * 8, dtype=np.float32).reshape(n, 8)
    out = pxla_mlir.pmap(lambda v: lax.psum(v, "i") * 3.0 + 1.0, "i")(x)
    print("@@" + json.dumps({"platform": jax.default_backend(), "devices": n, "out": np.asarray(out).tolist(),
                             "hits": hits[0]}))
""")

KERNEL = textwrap.dedent("""
    from jax import lax

    def kernel(x):
        return lax.psum(x, "i") * 2.0 + lax.axis_index("i")
""")


def child(argv: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    # Not in the checkout: `python -c` puts the working directory first on sys.path, and the checkout's
    # pxla_mlir (whose passes live in the top-level passes/) would hide the installed one.
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=tempfile.gettempdir())


def pxla_mlir_home() -> str:
    """The folder the pxla_mlir this process would import lives in (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("pxla_mlir")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("accelerator_check: pxla_mlir is not installed (pip install the wheel, or -e .)")
    return os.path.dirname(list(spec.submodule_search_locations)[0])


def last_json(proc: subprocess.CompletedProcess) -> dict:
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("@@"):
            return json.loads(line[2:])
    tail = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
    raise RuntimeError(f"child exited {proc.returncode}: {tail[:200]}")


def run_children(args, env: dict, tmp: str) -> dict:
    """The probe (which also writes the cache), the cache read, and the command line; before jax starts here."""
    found: dict = {}
    cache_env = dict(env, PXLA_MLIR_CACHE_DIR=os.path.join(tmp, "cache"))
    first = child([sys.executable, "-c", CACHE_CHILD, str(MAX_DEVICES)], cache_env, args.timeout)
    found["probe"] = last_json(first)  # no probe, no check: let it raise
    if found["probe"]["platform"] == "cpu" and not args.cpu:
        return found
    n = found["probe"]["devices"]
    try:
        found["cache"] = last_json(child([sys.executable, "-c", CACHE_CHILD, str(MAX_DEVICES)], cache_env,
                                         args.timeout))
    except Exception as e:  # noqa: BLE001
        found["cache"] = e

    # pxla-mlir emit on CPU (n virtual devices), then run on this platform
    try:
        import numpy as np

        with open(os.path.join(tmp, "kern.py"), "w") as f:
            f.write(KERNEL)
        cpu_env = {k: v for k, v in env.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
        cpu_env.update(JAX_PLATFORMS="cpu", XLA_FLAGS=f"--xla_force_host_platform_device_count={n}")
        for mode in ("partition", "replica"):
            proc = child([sys.executable, "-c", CLI, "emit", f"{tmp}/kern.py:kernel", "--map", "pmap", "--axis-name",
                          "i", "--arg", f"f32[{n},16]", "--mode", mode, "--cpu-devices", str(n), "-o",
                          f"{tmp}/{mode}.mlir"], cpu_env, args.timeout)
            if proc.returncode:
                raise RuntimeError(f"pxla-mlir emit --mode {mode} exited {proc.returncode}: "
                                   f"{(proc.stderr.strip().splitlines() or [''])[-1][:200]}")
        x = np.arange(n * 16, dtype=np.float32).reshape(n, 16) / 7
        np.save(f"{tmp}/x.npy", x)
        found["cli_input"] = x
        run_env = dict(env)
        extra = ["--cpu-devices", str(n)] if args.cpu else []
        proc = child([sys.executable, "-c", CLI, "run", f"{tmp}/partition.mlir", "--input", f"0={tmp}/x.npy", "-o",
                      f"{tmp}/out", *extra], run_env, args.timeout)
        found["cli_run"] = (np.load(f"{tmp}/out/0.npy") if proc.returncode == 0 else
                            RuntimeError(f"pxla-mlir run exited {proc.returncode}: "
                                         f"{(proc.stderr.strip().splitlines() or [''])[-1][:200]}"))
        proc = child([sys.executable, "-c", CLI, "run", f"{tmp}/partition.mlir", "--input", f"0={tmp}/x.npy",
                      "--compare", f"{tmp}/replica.mlir", *extra], run_env, args.timeout)
        found["cli_compare"] = proc
    except Exception as e:  # noqa: BLE001
        found["cli_error"] = e
    try:
        found["first_steps"] = first_steps(args, env, tmp)
    except Exception as e:  # noqa: BLE001
        found["first_steps"] = e
    return found


# ---------------------------------------------------------------- in-process cases

def correctness_cases(n: int, found: dict) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax
    from jax.sharding import PartitionSpec as P

    import pxla_mlir
    from pxla_mlir.errors import PxlaUserError

    x = np.arange(n * 12, dtype=np.float32).reshape(n, 12) / 3

    def f(v):
        return lax.psum(v, "i") * 2.0 + lax.axis_index("i") + jnp.sin(v)

    @case("pmap, replica mode")
    def _():
        return compare(pxla_mlir.pmap(f, "i")(x), jax.pmap(f, "i")(x))

    @case("pmap, partition mode, sdy")
    def _():
        return compare(pxla_mlir.pmap(f, "i", mode="partition")(x), jax.pmap(f, "i")(x))

    @case("pmap, partition mode, gspmd")
    def _():
        return compare(pxla_mlir.pmap(f, "i", mode="partition", shardings="gspmd")(x), jax.pmap(f, "i")(x))

    def g(a):
        return a * 2.0 + lax.psum(a, "b")

    for lowering in ("replica", "manual", "vectorize"):
        @case(f"xmap, {lowering} lowering")
        def _(lowering=lowering):
            xm = pxla_mlir.xmap(g, in_axes=["b", ...], out_axes=["b", ...], axis_resources={"b": "x"},
                                lowering=lowering)
            with pxla_mlir.Mesh.create({"x": n}):
                ours = xm(x)
            return compare(ours, jax.vmap(g, axis_name="b")(x))

    @case("nested pmap, size-1 inner axis")
    def _():
        def inner(r):
            return lax.psum(r, "j") + lax.psum(r, "i") * 2.0

        x3 = x.reshape(n, 1, 12)
        ours = pxla_mlir.pmap(pxla_mlir.pmap(inner, "j"), "i")(x3)
        return compare(ours, jax.vmap(jax.vmap(inner, axis_name="j"), axis_name="i")(x3))

    @case("partitioned pmap (partitions=)")
    def _():
        a = np.arange(n * 4 * 16, dtype=np.float32).reshape(n, 4, 16) / 50
        w = np.arange(16 * 32, dtype=np.float32).reshape(16, 32) / 100

        def body(b, w):
            return lax.psum(lax.with_sharding_constraint(b @ w, P(None, "model")), "data")

        ours = pxla_mlir.pmap(body, "data", in_axes=(0, None), mode="partition", partitions={"model": 1},
                              in_partitions=(P(), P(None, "model")), out_partitions=P(None, "model"))(a, w)
        theirs = jax.pmap(lambda b, w: lax.psum(b @ w, "data"), "data", in_axes=(0, None))(a, w)
        return compare(ours, theirs)

    @case("pxla_mlir.jit of a pmap")
    def _():
        ours = pxla_mlir.jit(lambda v: pxla_mlir.pmap(f, "i")(v) * 2.0)(x)
        theirs = jax.jit(lambda v: jax.pmap(f, "i")(v) * 2.0)(x)
        return compare(ours, theirs)

    @case("jax.debug.callback")
    def _():
        seen: dict = {"ours": [], "jax": []}

        def make(side):
            def h(v):
                jax.debug.callback(lambda u: seen[side].append(np.asarray(u)), v)
                return v + 1.0
            return h

        ours = pxla_mlir.pmap(make("ours"), "i")(x)
        theirs = jax.pmap(make("jax"), "i")(x)
        jax.effects_barrier()
        result = compare(ours, theirs)
        got = sorted(map(tuple, np.concatenate([s.reshape(-1, 12) for s in seen["ours"]])))
        want = sorted(map(tuple, np.concatenate([s.reshape(-1, 12) for s in seen["jax"]])))
        if got != want:
            return "differs (callback values)", f"{len(seen['ours'])} calls vs jax {len(seen['jax'])}"
        return result, f"{len(seen['ours'])} callback calls (jax {len(seen['jax'])})"

    @case("donation")
    def _():
        ours_in = pxla_mlir.pmap(lambda v: v, "i")(x)
        theirs_in = jax.pmap(lambda v: v, "i")(x)
        ours = pxla_mlir.pmap(lambda v: v * 2.0, "i", donate_argnums=0)(ours_in)
        theirs = jax.pmap(lambda v: v * 2.0, "i", donate_argnums=0)(theirs_in)
        result = compare(ours, theirs)
        if ours_in.is_deleted() != theirs_in.is_deleted():
            return "differs (donation)", f"input deleted: ours {ours_in.is_deleted()}, jax {theirs_in.is_deleted()}"
        return result, f"input deleted: {ours_in.is_deleted()} (as jax)"

    other = "cpu" if jax.default_backend() != "cpu" else None

    @case("pmap, backend= another platform")
    def _():
        if other is None:
            return "n/a", "the default backend is cpu"
        m = len(jax.devices(other))
        xo = x[:1].repeat(m, 0)
        return compare(pxla_mlir.pmap(f, "i", backend=other)(xo), jax.pmap(f, "i", backend=other)(xo)), \
            f"{m} {other} device(s)"

    @case("pmap, inputs committed to another platform")
    def _():
        if other is None:
            return "n/a", "the default backend is cpu"
        committed = jax.device_put(x, jax.devices(other)[0])
        try:
            theirs = np.asarray(jax.pmap(f, "i")(committed))
        except Exception as e:  # noqa: BLE001 - then ours must refuse clearly too
            theirs = e
        try:
            ours = np.asarray(pxla_mlir.pmap(f, "i")(committed))
        except PxlaUserError as e:
            head = str(e).splitlines()[0][:120]
            return ("refused clearly (as jax)" if isinstance(theirs, Exception) else "refused clearly"), head
        if isinstance(theirs, Exception):
            return "runs (jax refuses)", f"jax: {type(theirs).__name__}"
        return compare(ours, theirs), f"committed to {other}"

    @case("persistent cache, second process")
    def _():
        cached = found.get("cache")
        if isinstance(cached, Exception) or cached is None:
            raise cached or RuntimeError("not run")
        m = cached["devices"]
        xc = np.arange(m * 8, dtype=np.float32).reshape(m, 8)
        theirs = jax.pmap(lambda v: lax.psum(v, "i") * 3.0 + 1.0, "i")(xc)
        result = compare(np.asarray(cached["out"], np.float32), theirs)
        if not cached["hits"]:
            return "error: the second process compiled again (no cache hit)", ""
        return result, f"loaded from the cache ({cached['hits']} hit(s)); first process: {found['probe']['hits']}"

    def kernel(v):  # the function of KERNEL, which the children emit and run
        return lax.psum(v, "i") * 2.0 + lax.axis_index("i")

    @case("pxla-mlir run (module emitted on CPU)")
    def _():
        if "cli_error" in found:
            raise found["cli_error"]
        out = found["cli_run"]
        if isinstance(out, Exception):
            raise out
        return compare(out, jax.pmap(kernel, "i")(found["cli_input"])), "partition mode, sdy"

    @case("pxla-mlir run --compare (CPU-emitted)")
    def _():
        if "cli_error" in found:
            raise found["cli_error"]
        proc = found["cli_compare"]
        if proc.returncode == 0:
            return "equal", "partition-mode module against the replica-mode one"
        if proc.returncode == 1:
            return "differs", (proc.stdout.strip().splitlines() or [""])[-1][:120]
        return f"error: exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:160]}", ""


def timed_calls(fn, arg_sets, calls: int, rounds: int) -> float:
    """Median seconds per cached call (block at the end of each round)."""
    import jax

    out = fn(*arg_sets)
    jax.block_until_ready(out)
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            out = fn(*arg_sets)
        jax.block_until_ready(out)
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def dispatch_ratios(n: int, quick: bool) -> None:
    import jax
    import numpy as np

    import pxla_mlir

    calls, rounds = (5, 2) if quick else (200, 7)
    x = np.ones((n, 16), np.float32)

    def ratio(name, ours, theirs, args_ours, args_theirs, detail=""):
        try:
            # interleave: ours, jax, ours, jax ... (medians of each)
            t_ours, t_jax = [], []
            for _ in range(2):
                t_ours.append(timed_calls(ours, args_ours, calls, rounds))
                t_jax.append(timed_calls(theirs, args_theirs, calls, rounds))
            a, b = min(t_ours), min(t_jax)
            row(name, f"ratio {a / b:.2f}", f"pxla_mlir {a * 1e6:.1f} us, jax.pmap {b * 1e6:.1f} us{detail}")
        except Exception as e:  # noqa: BLE001
            row(name, error_text(e))

    one = pxla_mlir.pmap(lambda v: v + 1.0, "i")
    one_j = jax.pmap(lambda v: v + 1.0, "i")
    ratio("dispatch: cached call, 1 arg", one, one_j, (one(x),), (one_j(x),))

    many = pxla_mlir.pmap(lambda *vs: vs[0] + vs[-1], "i")
    many_j = jax.pmap(lambda *vs: vs[0] + vs[-1], "i")
    ones = pxla_mlir.pmap(lambda v: v, "i")(x)
    ones_j = jax.pmap(lambda v: v, "i")(x)
    ratio("dispatch: cached call, 100 args", many, many_j, (ones,) * 100, (ones_j,) * 100)

    ratio("dispatch: host numpy arg", one, one_j, (x,), (x,))


# ---------------------------------------------------------------- training step

def hlo_program(text: str) -> list[str]:
    """An optimized HLO module's instructions without what differs between two lowerings of one program:
    names, source metadata, the stack-frame tables, shardings and attributes, backend configs (whose JSON
    key order varies) and computations' parameter names."""
    out, skipping = [], False
    for line in text.splitlines():
        if line.startswith(("FileNames", "FunctionNames", "FileLocations", "StackFrames")):
            skipping = True
        elif skipping and line.startswith(("%", "ENTRY", "ROOT", "HloModule")):
            skipping = False
        if skipping or not line.strip() or line.startswith("HloModule"):
            continue
        line = re.sub(r", (metadata|backend_config|frontend_attributes|origin|sharding)=.*", "", line)
        line = re.sub(r"%[\w.-]+", "%v", line)
        out.append(re.sub(r"^(%v|ENTRY %v) \(.*?\) ->", r"\1 (...) ->", line))
    return out


def training_program(n: int, steps: int, quick: bool, blocks: int = 1, width: int = 128):
    """The transformer training step (bf16 parameters, Adam, gradients pmean'd), its replicated
    starting state, ``steps`` batches, and how each side maps it (state donated)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax import lax

    vocab, seq, hidden, batch = (32, 8, 32, 2) if quick else (256, 64, 4 * width, 8)
    width = 16 if quick else width
    bf16 = jnp.bfloat16

    def loss_fn(p, tokens):
        h = p["emb"][tokens[:, :-1]]  # (B, S-1, D)
        causal = jnp.tril(jnp.ones((seq - 1, seq - 1), bool))
        for b in range(blocks):
            q, k, v = (h @ p[f"{w}{b}"] for w in ("wq", "wk", "wv"))
            att = jnp.einsum("bqd,bkd->bqk", q, k).astype(jnp.float32) / np.sqrt(width)
            att = jax.nn.softmax(jnp.where(causal, att, -1e9), -1).astype(bf16)
            h = h + jnp.einsum("bqk,bkd->bqd", att, v) @ p[f"wo{b}"]
            h = h + jax.nn.gelu(h @ p[f"w1{b}"]) @ p[f"w2{b}"]
        logits = (h @ p["emb"].T).astype(jnp.float32)
        target = tokens[:, 1:]
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.mean(jnp.take_along_axis(logp, target[..., None], -1))

    def step(state, tokens):
        params, m, v, t = state
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens)
        grads = lax.pmean(grads, "i")
        t = t + 1
        b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-8
        m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g.astype(jnp.float32), m, grads)
        v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * jnp.square(g.astype(jnp.float32)), v, grads)
        corr = jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        params = jax.tree.map(lambda p, m, v: (p.astype(jnp.float32) - lr * corr * m / (jnp.sqrt(v) + eps)).astype(bf16),
                              params, m, v)
        return (params, m, v, t), lax.pmean(loss, "i")

    rng = np.random.default_rng(0)
    shapes = {"emb": (vocab, width)}
    for b in range(blocks):
        shapes.update({f"{w}{b}": (width, width) for w in ("wq", "wk", "wv", "wo")})
        shapes.update({f"w1{b}": (width, hidden), f"w2{b}": (hidden, width)})
    params = {k: (rng.standard_normal(s) * 0.05).astype(bf16) for k, s in shapes.items()}
    zeros = {k: np.zeros(s, np.float32) for k, s in shapes.items()}

    def replicated(tree):
        return jax.tree.map(lambda a: np.broadcast_to(np.asarray(a), (n, *np.shape(a))).copy(), tree)

    state0 = replicated((params, zeros, zeros, np.float32(0)))
    batches = [rng.integers(0, vocab, (n, batch, seq)).astype(np.int32) for _ in range(steps)]
    def ours():
        import pxla_mlir  # not before: a jax side's process never imports it

        return pxla_mlir.pmap(step, "i", donate_argnums=0)

    sides = {"ours": ours, "jax": lambda: jax.pmap(step, "i", donate_argnums=0)}
    return state0, batches, sides


FIRST_STEP_CHILD = textwrap.dedent("""
    import time
    t0 = time.perf_counter()
    import importlib.util, json, sys
    spec = importlib.util.spec_from_file_location("accelerator_check", sys.argv[1])
    check = importlib.util.module_from_spec(spec); spec.loader.exec_module(check)
    side, cache, blocks, width, quick = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1"
    import jax
    if cache:
        jax.config.update("jax_compilation_cache_dir", cache)  # jax's cache, which pxla_mlir's entries share
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    n = min(len(jax.devices()), check.MAX_DEVICES)
    state0, batches, sides = check.training_program(n, 1, quick, blocks, width)
    fn = sides[side]()
    t1 = time.perf_counter()
    state, loss = fn(state0, batches[0])
    jax.block_until_ready(loss)
    t2 = time.perf_counter()
    from pxla_mlir.mlir.support.stats import STATS
    print("@@" + json.dumps({"first": t2 - t1, "process": t2 - t0, "loss": float(loss[0]),
                             "lowering_loads": STATS["lowering_cache_loads"]}))
""")


def first_steps(args, env: dict, tmp: str) -> dict:
    """The training step's first step in fresh processes, sides alternating: cold (an empty cache directory
    each time) and warm (the cache filled by an earlier process of the same side). {label: {side: [runs]}}."""
    rounds = 1 if args.quick else 3
    common = [os.path.abspath(__file__), str(args.blocks), str(args.width), "1" if args.quick else "0"]

    def run(side: str, cache: str) -> dict:
        argv = [sys.executable, "-c", FIRST_STEP_CHILD, common[0], side, cache, *common[1:]]
        return last_json(child(argv, env, args.timeout))

    out: dict = {"cold": {"ours": [], "jax": []}, "warm": {"ours": [], "jax": []}}
    for r in range(rounds):
        for side in ("ours", "jax") if r % 2 == 0 else ("jax", "ours"):
            out["cold"][side].append(run(side, os.path.join(tmp, f"cold-{side}-{r}")))
    for side in ("ours", "jax"):
        run(side, os.path.join(tmp, f"warm-{side}"))  # the earlier process that fills the cache
    for r in range(rounds):
        for side in ("ours", "jax") if r % 2 == 0 else ("jax", "ours"):
            out["warm"][side].append(run(side, os.path.join(tmp, f"warm-{side}")))
    return out


def first_step_rows(found: dict) -> None:
    runs = found.get("first_steps")
    if isinstance(runs, Exception) or runs is None:
        row("training: first step, fresh process", error_text(runs) if runs else "not run")
        return
    for label, what in (("cold", "trace, lower, compile, run"), ("warm", "cache filled by an earlier process")):
        for key, name in (("first", "first step"), ("process", "whole process")):
            a = statistics.median(r[key] for r in runs[label]["ours"])
            b = statistics.median(r[key] for r in runs[label]["jax"])
            row(f"training: {name}, {label} start", f"ratio {a / b:.2f}",
                f"pxla_mlir {a:.2f} s, jax.pmap {b:.2f} s (fresh processes, median of {len(runs[label]['ours'])}, "
                f"alternating; {what})")
    loaded = sum(r["lowering_loads"] > 0 for r in runs["warm"]["ours"])
    row("training: warm start, lowering from the cache", f"{loaded} of {len(runs['warm']['ours'])} processes",
        "pxla_mlir processes that loaded their lowering from the persistent cache instead of lowering")
    losses = {r["loss"] for runs_ in runs.values() for side in runs_.values() for r in side}
    row("training: first step loss, every process", "equal" if len(losses) == 1 else f"differs: {sorted(losses)}")


def training(n: int, steps: int, quick: bool, hlo_dir: str | None = None, blocks: int = 1, width: int = 128) -> None:
    import jax
    import numpy as np

    from pxla_mlir.mlir.support.lru import clear_all

    state0, batches, sides = training_program(n, steps, quick, blocks, width)

    try:  # the optimized HLO of both sides
        counts, programs = {}, {}
        for side, make in sides.items():
            text = make().lower(state0, batches[0]).compile().as_text()
            if hlo_dir:
                os.makedirs(hlo_dir, exist_ok=True)
                with open(os.path.join(hlo_dir, f"training_{side}.hlo.txt"), "w") as out:
                    out.write(text)
            counts[side] = (len(text.splitlines()), len(re.findall(r"\bfusion\(", text)),
                            len(re.findall(r"\ball-reduce(?:-start)?\(", text)))
            programs[side] = hlo_program(text)
        o, j = counts["ours"], counts["jax"]
        same = programs["ours"] == programs["jax"]
        row("training: optimized HLO", "same program" if same else "different program",
            f"lines/fusions/all-reduces: pxla_mlir {o[0]}/{o[1]}/{o[2]}, jax.pmap {j[0]}/{j[1]}/{j[2]}"
            + (" (equal but for names, metadata, shardings)" if same else ""))
    except Exception as e:  # noqa: BLE001
        row("training: optimized HLO", error_text(e))

    try:  # first steps of fresh functions, caches cleared, sides alternating (best of 3; the first one pays
        # this process's one-time costs), then the steady steps interleaved in chunks
        fns, states, first = {}, {}, {"ours": [], "jax": []}
        for r in range(1 if quick else 3):
            for side in (sides if r % 2 == 0 else reversed(sides)):
                clear_all()
                jax.clear_caches()
                fns[side] = sides[side]()
                start = time.perf_counter()
                states[side], loss = fns[side](jax.tree.map(np.copy, state0), batches[0])
                jax.block_until_ready(loss)
                first[side].append(time.perf_counter() - start)
        a, b = min(first["ours"]), min(first["jax"])
        row("training: first step ratio", f"ratio {a / b:.2f}",
            f"pxla_mlir {a * 1e3:.0f} ms, jax.pmap {b * 1e3:.0f} ms (best of {len(first['ours'])}, alternating)")
        chunk = max(1, min(10, (steps - 1) // 4 or 1))
        times = {"ours": [], "jax": []}
        k = 1
        while k < steps:
            todo = batches[k:k + chunk]
            for side in sides:
                start = time.perf_counter()
                for b in todo:
                    states[side], loss = fns[side](states[side], b)
                jax.block_until_ready(loss)
                times[side].append((time.perf_counter() - start) / len(todo))
            k += len(todo)
        if times["ours"]:
            a, b = statistics.median(times["ours"]), statistics.median(times["jax"])
            row("training: step time ratio", f"ratio {a / b:.2f}",
                f"pxla_mlir {a * 1e3:.2f} ms, jax.pmap {b * 1e3:.2f} ms (median of {len(times['ours'])} chunks)")
        ours_p = jax.tree.leaves(states["ours"][0])
        jax_p = jax.tree.leaves(states["jax"][0])
        diff = max(float(np.max(np.abs(np.asarray(a, np.float32) - np.asarray(b, np.float32))))
                   for a, b in zip(ours_p, jax_p))
        row(f"training: params after {steps} steps", "equal to jax" if diff == 0 else f"differs (max abs err "
            f"{diff:.3g})", "bf16 parameters, f32 Adam moments")
    except Exception as e:  # noqa: BLE001
        row("training: steps", error_text(e))


# ---------------------------------------------------------------- main

def main(argv=None) -> int:
    args = parse_args(argv)
    env = dict(os.environ)
    if args.cpu:
        env["JAX_PLATFORMS"] = "cpu"
        env["XLA_FLAGS"] = " ".join([f for f in env.get("XLA_FLAGS", "").split() if "device_count" not in f]
                                    + [f"--xla_force_host_platform_device_count={args.cpu_devices}"])
    env["PYTHONPATH"] = os.pathsep.join([pxla_mlir_home(), *filter(None, [env.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="pxla_accel_") as tmp:
        try:
            found = run_children(args, env, tmp)
        except Exception as e:  # noqa: BLE001 - without the probe nothing else can run
            print(f"accelerator_check: could not start jax in a child process: {error_text(e)}")
            return 1
        platform, n = found["probe"]["platform"], found["probe"]["devices"]
        if platform == "cpu" and not args.cpu:
            print("accelerator_check: no accelerator (jax's default backend is cpu); nothing checked. "
                  "Run with --cpu to check the same cases on CPU devices.")
            return 0
        os.environ.update({k: env[k] for k in ("JAX_PLATFORMS", "XLA_FLAGS") if k in env})
        import jax

        if jax.default_backend() != platform:
            row("platform", f"error: this process runs on {jax.default_backend()}, the children on {platform}")
        correctness_cases(n, found)
        dispatch_ratios(n, args.quick)
        training(n, args.steps, args.quick, args.hlo_dir, args.blocks, args.width)
        first_step_rows(found)
    print_table(platform, n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
