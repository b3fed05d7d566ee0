"""Where the milliseconds of a first step go, pxla_mlir against jax.pmap: one
cold and one warm start of the transformer training step of
``accelerator_check.py``, phase by phase, in fresh processes.

    python bench/bench_first_step_phases.py [--rounds 3] [--blocks 4] [--width 512]  # the accelerator jax finds
    python bench/bench_first_step_phases.py --cpu [--rounds 3]                       # 8 virtual CPU devices

Each round runs one process per side and start, sides alternating: cold (an
empty cache directory) and warm (the directory an earlier, unmeasured process
of the same side filled). A process times its phases: Python's start, the
imports, the backend's start (``jax.devices()``), making the program's data,
then its first step: trace, lowering (jax's, and for pxla_mlir the import and
the pipeline) or the lowering cache (its key, and the read), compile or the
executable's load from the persistent cache (read, unseal: checksums and
decompress, deserialize), for pxla_mlir placing the host data on the devices
and launching, and what is left (for jax its placing and launching too; the
run, reading the loss). jax's phases come from its own monitoring events
(traces nest: their union is counted), pxla_mlir's from its ``TIMINGS``.
Prints the medians in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = textwrap.dedent("""
    import time
    t0 = time.perf_counter()
    import importlib.util, json, os, sys
    check_path, side, cache, blocks, width = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    t_start = time.perf_counter()
    import jax
    t_jax = time.perf_counter()
    if side == "ours":
        import pxla_mlir
        from pxla_mlir.mlir.support.stats import TIMINGS
        pxla_mlir.pmap  # the package imports its parts when first asked for them
    t_ours = time.perf_counter()
    jax.config.update("jax_compilation_cache_dir", cache)  # jax's cache, which pxla_mlir's entries share
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    events = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda name, secs, **_: events.append((name, time.perf_counter() - secs, time.perf_counter())))
    n = min(len(jax.devices()), 8)
    t_backend = time.perf_counter()
    spec = importlib.util.spec_from_file_location("accelerator_check", check_path)
    check = importlib.util.module_from_spec(spec); spec.loader.exec_module(check)
    state0, batches, sides = check.training_program(n, 1, False, blocks, width)
    fn = sides[side]()  # host data, as a fresh training process has
    t_data = time.perf_counter()
    events.clear()
    if side == "ours":  # two more phases, timed from outside: the lowering cache's key, placing and launching
        import functools
        from pxla_mlir.runtime.executable import ShardedExecutable
        from pxla_mlir.stages import lowering_cache

        def timing(owner, name, step):
            f = getattr(owner, name)
            def timed_call(*a, **k):
                start = time.perf_counter()
                try:
                    return f(*a, **k)
                finally:
                    TIMINGS[step] += time.perf_counter() - start
            setattr(owner, name, functools.wraps(f)(timed_call))

        timing(lowering_cache, "key", "lowering key")
        timing(ShardedExecutable, "_place_and_execute", "place and launch")
        TIMINGS.clear()
    t1 = time.perf_counter()
    state, loss = fn(state0, batches[0])
    loss = float(jax.block_until_ready(loss)[0])
    t2 = time.perf_counter()

    def union(*names):  # seconds covered by the events of these names (traces nest; a load may sit in a compile)
        spans = sorted((a, b) for e, a, b in events if e in names and a >= t1)
        total, end = 0.0, t1
        for a, b in spans:
            if b > end:
                total += b - max(a, end)
                end = b
        return total

    if side == "ours":
        T = TIMINGS  # a step not timed reads 0
        step = {"trace": T["trace"], "lowering": T["import"] + T["passes"],
                "lowering cache": T["lowering key"] + T["lowering cache"], "  key": T["lowering key"],
                "compile or load": T["compile"], "  read": T["cache read"], "  unseal": T["cache unseal"],
                "  deserialize": T["deserialize"], "place and launch": T["place and launch"]}
    else:
        step = {"trace": union("/jax/core/compile/jaxpr_trace_duration"),
                "lowering": union("/jax/core/compile/jaxpr_to_mlir_module_duration"), "lowering cache": 0.0,
                "  key": None, "place and launch": None,
                "compile or load": union("/jax/core/compile/backend_compile_duration",
                                         "/jax/compilation_cache/cache_retrieval_time_sec"),
                "  read": None, "  unseal": None,
                "  deserialize": None}
    top = sum(step[k] or 0.0 for k in ("trace", "lowering", "lowering cache", "compile or load", "place and launch"))
    phases = {"python start": t_start - t0, "import jax": t_jax - t_start, "import pxla_mlir": t_ours - t_jax,
              "backend start": t_backend - t_ours, "program data": t_data - t_backend,
              "first step": t2 - t1, **step, "the rest": t2 - t1 - top, "process": t2 - t0}
    print("@@" + json.dumps({"phases": phases, "loss": loss}))
""")

ROWS = ["python start", "import jax", "import pxla_mlir", "backend start", "program data", "first step", "trace",
        "lowering", "lowering cache", "  key", "compile or load", "  read", "  unseal", "  deserialize",
        "place and launch", "the rest", "process"]


def run(side: str, cache: str, args, env: dict) -> dict:
    argv = [sys.executable, "-c", CHILD, os.path.join(HERE, "accelerator_check.py"), side, cache, str(args.blocks),
            str(args.width)]
    p = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=args.timeout,
                       cwd=tempfile.gettempdir())  # not the checkout: the installed pxla_mlir is measured
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("@@"):
            return json.loads(line[2:])
    raise SystemExit(f"{side} failed ({p.returncode}):\n{p.stderr[-3000:]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--cpu", action="store_true", help="8 virtual CPU devices instead of the accelerator")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args(argv)
    env = dict(os.environ)
    if args.cpu:
        env.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=8")
    runs: dict = {(start, side): [] for start in ("cold", "warm") for side in ("ours", "jax")}
    with tempfile.TemporaryDirectory(prefix="pxla_phases_") as tmp:
        for side in ("ours", "jax"):  # the earlier processes that fill the warm caches
            run(side, os.path.join(tmp, f"warm-{side}"), args, env)
        for r in range(args.rounds):
            for side in ("ours", "jax") if r % 2 == 0 else ("jax", "ours"):
                runs["cold", side].append(run(side, os.path.join(tmp, f"cold-{side}-{r}"), args, env))
                runs["warm", side].append(run(side, os.path.join(tmp, f"warm-{side}"), args, env))
    losses = {r["loss"] for rs in runs.values() for r in rs}
    print(f"median ms of {args.rounds} fresh processes per column, sides alternating; "
          f"{'8 virtual CPU devices' if args.cpu else 'the accelerator'}; transformer step, {args.blocks} blocks, "
          f"width {args.width}; first-step loss {'equal in every process' if len(losses) == 1 else losses}\n")
    cols = [("cold", "ours"), ("cold", "jax"), ("warm", "ours"), ("warm", "jax")]
    print(f"{'phase':<26}" + "".join(f"{s + ' ' + ('pxla' if d == 'ours' else 'jax'):>12}" for s, d in cols)
          + f"{'cold ratio':>12}{'warm ratio':>12}")

    def median(col, row):
        values = [r["phases"][row] for r in runs[col] if r["phases"][row] is not None]
        return statistics.median(values) * 1e3 if values else None

    for row in ROWS:
        cells = [median(c, row) for c in cols]
        text = "".join(f"{'-' if v is None else f'{v:.0f}':>12}" for v in cells)
        for ours, theirs in ((cells[0], cells[1]), (cells[2], cells[3])):
            # no ratio against a phase jax does not have (import pxla_mlir: 0 ms, shown as 0)
            measurable = ours is not None and theirs is not None and theirs >= 0.5
            text += f"{ours / theirs:>12.2f}" if measurable else f"{'':>12}"
        print(f"{row:<26}{text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
