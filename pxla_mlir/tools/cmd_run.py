"""pxla-mlir run: compile and run a pmap or xmap (or a module from a .mlir file) from the command line.

    pxla-mlir run examples/nested_reduction.py:two_level_sum --calls 100
    pxla-mlir run examples/goldens/nested_reduction.mlir --compare nested.mlir   # see cmd_run_module
"""

from __future__ import annotations

import sys

from pxla_mlir.tools.comparing import ATOL, RTOL
from pxla_mlir.tools.emit import prepare
from pxla_mlir.tools.errors import non_negative_int, positive_int
from pxla_mlir.tools.map_args import add_map_arguments, map_options
from pxla_mlir.tools.progress import status
from pxla_mlir.tools.running import inputs, measure, print_outputs, timing_line


def add_parser(sub) -> None:
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
    with status(f"loading {args.target}"):
        prepared = prepare(args.target, map_options(args))
    values = inputs(prepared, args.input, args.seed)
    with prepared.context():
        lowered, outs, timings = measure(prepared.fn, values, values, args.calls)
    devices = lowered.devices
    # What ran goes to stderr, what it gave to stdout (timings and outputs: what a pipe or a file keeps).
    print(f"ran on {len(devices)} {devices[0].platform.upper()} devices; pipeline {lowered.pipeline}", file=sys.stderr)
    for name, seconds in timings.items():
        print(timing_line(name, seconds, args.calls))
    print_outputs(outs)
    return 0

