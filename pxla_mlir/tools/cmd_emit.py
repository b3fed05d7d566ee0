"""pxla-mlir emit / run: lower (and run) a pmap or xmap from the command line.

    pxla-mlir emit examples/train_step.py:train_step                 # declared example inputs
    pxla-mlir emit pkg.mod:f --map pmap --axis-name i --arg f32[8,128] --stage pxla
    pxla-mlir emit file.py:f --stage after:pxla-expand-unshard --dump-dir dumps/
    pxla-mlir run examples/nested_reduction.py:two_level_sum --calls 100
    pxla-mlir run examples/goldens/nested_reduction.mlir --compare nested.mlir   # see cmd_run_module
"""

from __future__ import annotations

import os

from pxla_mlir.tools.comparing import ATOL, RTOL
from pxla_mlir.tools.emit import MapOptions, prepare, stage_text
from pxla_mlir.tools.errors import CliError, non_negative_int, positive_int, write_output
from pxla_mlir.tools.map_args import MAP_FLAGS, add_map_arguments, map_options
from pxla_mlir.tools.running import inputs, measure, print_outputs, timing_line


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
    r = sub.add_parser("run", help="compile and run a pmap/xmap, or a module from a .mlir file, on random or given "
                                   "inputs")
    add_map_arguments(r, target_help="module:function, path/to/file.py:function, or FILE.mlir ('-': a module on "
                                     "stdin)")
    r.add_argument("--input", action="append", default=[], metavar="N=FILE.npy",
                   help="argument N from a .npy file (others are random)")
    r.add_argument("--seed", type=non_negative_int, default=0, help="seed of the random inputs (>= 0; default 0)")
    r.add_argument("--calls", type=positive_int, default=None,
                   help="steady-state calls to time (default 20; a .mlir module is timed only when given)")
    m = r.add_argument_group("a module from a .mlir file", "exit 0: ran (and the results agree), 1: compared results "
                                                            "differ, 2: a mistake")
    m.add_argument("-o", dest="output_dir", metavar="DIR", help="write each result to DIR/<index>.npy")
    m.add_argument("--pipeline", help="run this pipeline on the module first (default: what it needs)")
    m.add_argument("--compare", metavar="OTHER.mlir", help="run OTHER.mlir on the same inputs and compare results")
    m.add_argument("--compare-pipeline", metavar="PIPELINE",
                   help="compare the module with itself after PIPELINE (a pass's numerical differential test)")
    m.add_argument("--expect", metavar="DIR", help="compare the results with DIR/<index>.npy")
    m.add_argument("--rtol", type=float, default=None, help=f"relative tolerance for floats (default {RTOL:g})")
    m.add_argument("--atol", type=float, default=None, help=f"absolute tolerance for floats (default {ATOL:g})")
    r.add_argument("--processes", type=positive_int, default=1, metavar="N",
                   help="run as N local processes of one jax.distributed run (--cpu-devices split between them)")
    r.add_argument("--timeout", type=float, default=600, metavar="SECONDS",
                   help="with --processes: kill every process after this long (default 600)")
    r.add_argument("--launcher", choices=("local", "mpirun"), default="local",
                   help="with --processes: start them here (local, the default) or with Open MPI's mpirun")
    r.set_defaults(func=run_run)


def emit_text(target: str, options: dict) -> str:
    """Emit with options given as {flag: [values]} (used by diff's emit specs)."""
    known = set(MAP_FLAGS) | {"arg", "stage", "dialect", "pipeline"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise CliError(f"unknown emit option {unknown[0]!r} in {target!r}; known: {', '.join(sorted(known))}")
    one = {k: v[-1] for k, v in options.items()}
    opts = MapOptions(**{k: one[k] for k in MAP_FLAGS if k in one}, args=tuple(options.get("arg", ())))
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
    write_output(args.output, text)
    return 0


def run_run(args) -> int:
    from pxla_mlir.tools import cmd_run_module, cmd_run_processes

    if cmd_run_module.is_module_target(args.target):
        cmd_run_module.check_flags(args)
    else:
        cmd_run_module.reject_module_flags(args)
        args.calls = 20 if args.calls is None else args.calls
    if args.processes != 1 or args.launcher != "local":
        return cmd_run_processes.run(args)
    if cmd_run_module.is_module_target(args.target):
        return cmd_run_module.run(args)
    prepared = prepare(args.target, map_options(args))
    values = inputs(prepared, args.input, args.seed)
    with prepared.context():
        lowered, outs, timings = measure(prepared.fn, values, values, args.calls)
    devices = lowered.devices
    print(f"ran on {len(devices)} {devices[0].platform.upper()} devices; pipeline {lowered.pipeline}")
    for name, seconds in timings.items():
        print(timing_line(name, seconds, args.calls))
    print_outputs(outs)
    return 0

