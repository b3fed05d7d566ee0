"""pxla-mlir emit / run: lower (and run) a pmap or xmap from the command line.

    pxla-mlir emit examples/train_step.py:train_step                 # declared example inputs
    pxla-mlir emit pkg.mod:f --map pmap --axis-name i --arg f32[8,128] --stage pxla
    pxla-mlir emit file.py:f --stage after:pxla-expand-unshard --dump-dir dumps/
    pxla-mlir run examples/nested_reduction.py:two_level_sum --calls 100
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from ..emit import MapOptions, prepare, stage_text
from ..pipelines import PmapPipeline, XmapPipeline, choices
from .errors import CliError, positive_int

_MAP_FLAGS = ("map", "axis_name", "in_axes", "out_axes", "mode", "unshard", "lowering", "shardings",
              "axis_resources", "axis_sizes", "mesh")


def add_map_arguments(p) -> None:
    p.add_argument("target", help="module:function or path/to/file.py:function")
    g = p.add_argument_group("how to map a plain function (a pxla_mlir.pmap/xmap object takes only its pipeline "
                             "options, and --mesh for an xmap)")
    g.add_argument("--map", choices=("pmap", "xmap"))
    g.add_argument("--axis-name", help="pmap axis name")
    g.add_argument("--in-axes", help="a Python literal: 0, (0, None), ['batch', ...], ...")
    g.add_argument("--out-axes", help="a Python literal, like --in-axes")
    g.add_argument("--axis-resources", help="xmap: {'batch': 'x'}")
    g.add_argument("--axis-sizes", help="xmap: {'k': 4}")
    g.add_argument("--mesh", help="xmap mesh as sizes:names, e.g. 2x4:x,y")
    g.add_argument("--mode", choices=choices(PmapPipeline, "mode"), help="pmap: replica or partition mode")
    g.add_argument("--unshard", choices=choices(PmapPipeline, "unshard"), help="pmap: nested unshard strategy")
    g.add_argument("--lowering", choices=choices(XmapPipeline, "lowering"), help="xmap lowering")
    g.add_argument("--shardings", choices=choices(PmapPipeline, "shardings"),
                   help="partition mode, xmap manual/vectorize: Shardy (sdy, the default) or GSPMD shardings")
    g.add_argument("--arg", action="append", default=[], metavar="DTYPE[DIMS]",
                   help="argument shape, one per positional argument: f32[8,128], i32[], bool[4]")


def map_options(args) -> MapOptions:
    return MapOptions(**{f: getattr(args, f) for f in _MAP_FLAGS}, args=tuple(args.arg))


def add_parsers(sub) -> None:
    e = sub.add_parser("emit", help="print the MHLO (or another stage) of a pmap/xmap")
    add_map_arguments(e)
    e.add_argument("--stage", default="mhlo",
                   help="pxla (imported), after:<pass>, mhlo (final, the default) or xla (optimized HLO)")
    e.add_argument("--pipeline", help="run this pipeline instead of the map's own")
    e.add_argument("--dump-dir", help="write the module after every pass to DIR/NN_<pass>.mlir")
    e.add_argument("--dialect", choices=("mhlo", "stablehlo"), default="mhlo", help="export the result as")
    e.add_argument("-o", dest="output", default="-", help="output file ('-': stdout)")
    e.set_defaults(func=run_emit)
    r = sub.add_parser("run", help="compile and run a pmap/xmap on random or given inputs")
    add_map_arguments(r)
    r.add_argument("--input", action="append", default=[], metavar="N=FILE.npy",
                   help="argument N from a .npy file (others are random)")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--calls", type=positive_int, default=20, help="steady-state calls to time (at least 1)")
    r.add_argument("--processes", type=positive_int, default=1, metavar="N",
                   help="run as N local processes of one jax.distributed run (--cpu-devices split between them)")
    r.add_argument("--timeout", type=float, default=600, metavar="SECONDS",
                   help="with --processes: kill every process after this long (default 600)")
    r.set_defaults(func=run_run)


def emit_text(target: str, options: dict) -> str:
    """Emit with options given as {flag: [values]} (used by diff's emit specs)."""
    known = set(_MAP_FLAGS) | {"arg", "stage", "dialect", "pipeline"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise CliError(f"unknown emit option {unknown[0]!r} in {target!r}; known: {', '.join(sorted(known))}")
    one = {k: v[-1] for k, v in options.items()}
    opts = MapOptions(**{k: one[k] for k in _MAP_FLAGS if k in one}, args=tuple(options.get("arg", ())))
    prepared = prepare(target, opts)
    with prepared.context():
        lowered = prepared.fn.lower(*[a.struct() for a in prepared.args])
        return stage_text(lowered, one.get("stage", "mhlo"), pipeline=one.get("pipeline"),
                          dialect=one.get("dialect", "mhlo"))


def _check_dump_dir(path: str) -> None:
    """--dump-dir must be a directory that exists or can be made (before the lowering's work)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise CliError(f"--dump-dir {path!r} is a file, not a directory; give a directory (it is made if missing)")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise CliError(f"cannot make --dump-dir {path!r}: {e.strerror}") from None


def run_emit(args) -> int:
    if args.dump_dir is not None:
        _check_dump_dir(args.dump_dir)
    prepared = prepare(args.target, map_options(args))
    with prepared.context():
        lowered = prepared.fn.lower(*[a.struct() for a in prepared.args])
        text = stage_text(lowered, args.stage, pipeline=args.pipeline, dump_dir=args.dump_dir,
                          dialect=args.dialect)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        try:
            with open(args.output, "w") as f:
                f.write(text)
        except OSError as e:
            raise CliError(f"cannot write {args.output!r}: {e.strerror}") from None
    return 0


def _inputs(prepared, given: list[str], seed: int) -> list:
    rng = np.random.default_rng(seed)
    values = [spec.random(rng) for spec in prepared.args]
    for item in given:
        index, eq, path = item.partition("=")
        if not eq or not index.isdigit() or not int(index) < len(values):
            raise CliError(f"--input must be N=FILE.npy with 0 <= N < {len(values)}, got {item!r}")
        try:
            loaded = np.load(path)
        except (OSError, ValueError) as e:
            raise CliError(f"cannot load {path!r}: {e}") from None
        spec = prepared.args[int(index)]
        if loaded.shape != spec.shape:
            raise CliError(f"{path!r} has shape {loaded.shape}, argument {index} is {spec}")
        values[int(index)] = loaded.astype(spec.dtype)
    return values


def run_run(args) -> int:
    from . import cmd_run_processes

    if args.processes != 1:
        return cmd_run_processes.run(args)
    prepared = prepare(args.target, map_options(args))
    values = _inputs(prepared, args.input, args.seed)
    with prepared.context():
        lowered, outs, timings = measure(prepared.fn, values, values, args.calls)
    devices = lowered.devices
    print(f"ran on {len(devices)} {devices[0].platform.upper()} devices; pipeline {lowered.pipeline}")
    for name, seconds in timings.items():
        print(timing_line(name, seconds, args.calls))
    print_outputs(outs)
    return 0


def measure(fn, lower_args, call_args, calls: int, prepare_args=None):
    """Lowers, compiles and times ``fn``: the ``Lowered``, the first call's
    outputs, and seconds per step (trace, import, passes, compile, first
    call, steady-state call). ``prepare_args(lowered)`` may replace
    ``call_args`` once the layout is known."""
    import jax

    from ..stages import TIMINGS

    TIMINGS.clear()
    lowered = fn.lower(*lower_args)
    with _status(f"compiling for {len(lowered.devices)} devices"):
        compiled = lowered.compile()
    if prepare_args is not None:
        call_args = prepare_args(lowered)
    t = time.perf_counter()
    outs = jax.block_until_ready(compiled(*call_args))
    first = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(max(calls, 1)):
        jax.block_until_ready(compiled(*call_args))
    steady = (time.perf_counter() - t) / max(calls, 1)
    timings = {name: TIMINGS[name] for name in ("trace", "import", "passes", "compile")}
    timings.update({"first call": first, "steady-state call": steady})
    return lowered, outs, timings


def timing_line(name: str, seconds: float, calls: int) -> str:
    if name == "steady-state call":
        return f"  {name:<22} {seconds * 1e3:9.3f} ms  (mean of {calls})"
    return f"  {name:<22} {seconds * 1e3:9.2f} ms"


def print_outputs(outs) -> None:
    import jax

    for path, leaf in jax.tree_util.tree_flatten_with_path(outs)[0]:
        arr = np.asarray(leaf)
        print(f"output{jax.tree_util.keystr(path)}: {arr.dtype}{list(arr.shape)}")
        with np.printoptions(precision=4, threshold=24, edgeitems=3, linewidth=100):
            print(arr)


class _status:
    """A spinner on stderr while XLA compiles (only on a terminal)."""

    def __init__(self, text: str):
        self.text, self._status = text, None

    def __enter__(self):
        if sys.stderr.isatty() and not os.environ.get("PXLA_NO_PROGRESS"):
            from rich.console import Console

            self._status = Console(stderr=True).status(self.text)
            self._status.__enter__()
        return self

    def __exit__(self, *exc):
        if self._status is not None:
            self._status.__exit__(*exc)
        return False
