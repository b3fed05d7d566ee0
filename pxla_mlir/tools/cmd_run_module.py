"""``pxla-mlir run FILE.mlir``: compile and run a module from a file, and compare its results.

    pxla-mlir run step.mlir                              # random inputs (--seed), results printed
    pxla-mlir run step.mlir --input 0=x.npy -o out/      # results to out/0.npy, out/1.npy, ...
    pxla-mlir run new.mlir --compare golden.mlir         # both on the same inputs, every result compared
    pxla-mlir run pxla_form.mlir --compare-pipeline 'builtin.module(pxla-pmap-pipeline{unshard=all-reduce})'
    pxla-mlir run step.mlir --expect out/                # against saved results

The module is read by :func:`pxla_mlir.stages.text_module.load` (final MHLO, the pxla
form, jax's StableHLO), takes its global inputs and gives its global
outputs. A comparison prints one row per result and exits 1 when any
differs; mistakes (a file that does not parse, inputs of another shape or
dtype, too few devices, a module XLA rejects) are one-line errors, exit 2,
found before anything runs.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys

import numpy as np

from pxla_mlir.mlir.support.stats import TIMINGS
from pxla_mlir.tools.comparing import ATOL, RTOL, compare, table
from pxla_mlir.tools.errors import CliError
from pxla_mlir.tools.map_args import MAP_FLAGS
from pxla_mlir.tools.progress import status
from pxla_mlir.tools.running import load_npy, module_inputs, print_outputs, save_npy, time_calls, timing_line

__all__ = ["is_module_target", "check_flags", "reject_module_flags", "load_target", "compile_target", "run"]

#: The run flags that only a module takes (argparse fields).
MODULE_FLAGS = ("output_dir", "pipeline", "compare", "compare_pipeline", "expect", "rtol", "atol")


def _flag(field: str) -> str:
    return "-o" if field == "output_dir" else "--" + field.replace("_", "-")


def is_module_target(target: str) -> bool:
    return target == "-" or target.endswith(".mlir")


def check_flags(args) -> None:
    """A module's run takes no mapping flags, and one comparison at a time.
    Its mistakes exit 2 as every mistake does; 1 means that results differ."""
    mapping = [f for f in MAP_FLAGS if getattr(args, f, None) is not None]
    if mapping:
        raise CliError(f"{_flag(mapping[0])} says how to map a Python function; a .mlir module needs no mapping "
                       f"(run another pipeline on it with --pipeline)")
    comparisons = [f for f in ("compare", "compare_pipeline", "expect") if getattr(args, f) is not None]
    if len(comparisons) > 1:
        raise CliError(f"{_flag(comparisons[0])} and {_flag(comparisons[1])}: compare with one thing at a time")
    if args.target == "-" and args.compare_pipeline is not None:
        raise CliError("--compare-pipeline reads the module twice: give a FILE.mlir, not stdin")
    if args.target == "-" and args.compare == "-":
        raise CliError("the module and --compare cannot both come from stdin: give one of them as a FILE.mlir")
    if not comparisons and (args.rtol is not None or args.atol is not None):
        raise CliError("--rtol/--atol need --compare, --compare-pipeline or --expect")
    if args.processes != 1:
        extra = [f for f in ("output_dir", *comparisons) if getattr(args, f) is not None]
        if extra:
            raise CliError(f"{_flag(extra[0])} works in a one-process run; with --processes the results are printed")
        if args.target == "-":
            raise CliError("--processes starts copies of this command, which cannot share stdin: give a FILE.mlir")
        args.calls = 20 if args.calls is None else args.calls


def reject_module_flags(args) -> None:
    given = [f for f in MODULE_FLAGS if getattr(args, f) is not None]
    if given:
        raise CliError(f"{_flag(given[0])} applies to a .mlir module; {args.target!r} is a Python target (write its "
                       f"module with pxla-mlir emit {args.target} -o FILE.mlir, then run that)")


def load_target(target: str, pipeline: str | None = None):
    from pxla_mlir.stages.text_module import load

    if target == "-":
        data = sys.stdin.buffer.read()
        with status("loading the module from stdin"):
            return load(data, pipeline=pipeline, name="<stdin>")
    with status(f"loading {target}"):
        return load(target, pipeline=pipeline)


def compile_target(lowered):
    """``lowered.compile()`` (kept by the Lowered), saying so while XLA works."""
    with status(f"compiling {lowered.source} for {len(lowered.devices)} devices"):
        return lowered.compile()


def _ran_line(lowered) -> str:
    from pxla_mlir.mlir.core.pxla_attrs import device_counts

    replicas, partitions = device_counts(lowered.mhlo().operation)
    devices = lowered.devices
    how = f"{partitions} partitions" if partitions > 1 else f"{replicas} replica{'s' if replicas > 1 else ''}"
    where = f"{len(devices)} {devices[0].platform.upper()} device{'s' if len(devices) > 1 else ''}"
    return f"ran {lowered.source} on {where} ({how}); pipeline {lowered.pipeline}"


def _results(lowered, values) -> list[np.ndarray]:
    compiled = compile_target(lowered)
    with _running(lowered), status(f"running {lowered.source}"):
        return [np.asarray(r) for r in compiled(*values)]


@contextlib.contextmanager
def _running(lowered):
    """An error XLA raises while the module runs, as one line."""
    from pxla_mlir.jaxbridge.jax_internals import JaxRuntimeError

    try:
        yield
    except JaxRuntimeError as e:
        first = next((line for line in str(e).splitlines() if line.strip()), type(e).__name__)
        raise CliError(f"{lowered.source}: running the module failed: {first}") from None


def run(args) -> int:
    TIMINGS.clear()
    # Everything that can be wrong is found before anything runs: both
    # modules, the inputs, the saved results, the output directory.
    lowered = load_target(args.target, args.pipeline)
    values = module_inputs(lowered.layout.in_avals, args.input, args.arg, args.seed, lowered.source)
    compile_target(lowered)
    steps = {name: TIMINGS[name] for name in ("passes", "compile")}  # this module's, not the other's
    other, expected, what = _other(args, lowered)
    if args.output_dir is not None:
        _make_dir(args.output_dir)
    timing_lines: list[str] = []
    if args.calls is not None:
        with _running(lowered):
            outs, timings = time_calls(lowered, values, args.calls, steps=())
            timings = {**steps, **timings}
            results = [np.asarray(r) for r in outs]
        timing_lines = [timing_line(name, seconds, args.calls) for name, seconds in timings.items()]
    else:
        results = _results(lowered, values)
    # What ran goes to stderr, what it gave to stdout (timings, outputs, comparisons: what a pipe or a file keeps).
    print(_ran_line(lowered), file=sys.stderr)
    print(f"layout: {lowered.layout_note}", file=sys.stderr)
    for line in timing_lines:
        print(line)
    if args.output_dir is not None:
        _write(args.output_dir, results)
    if other is not None:
        expected = _results(other, values)
        print(_ran_line(other), file=sys.stderr)
    if expected is None:
        print_outputs(results)
        return 0
    rtol = RTOL if args.rtol is None else args.rtol
    atol = ATOL if args.atol is None else args.atol
    rows = compare(results, expected, rtol, atol)
    print(f"compared with {what} (rtol {rtol:g}, atol {atol:g}):")
    print(table(rows))
    differ = sum(not r.agrees for r in rows)
    print(f"{differ} of {len(rows)} results differ" if differ else f"all {len(rows)} results agree")
    return 1 if differ else 0


def _other(args, lowered) -> tuple:
    """What the results are compared with: (another module to run, or None;
    saved results, or None; what they are, for the table's title)."""
    if args.expect is not None:
        return None, _saved(args.expect, lowered.layout.out_avals), args.expect
    if args.compare is None and args.compare_pipeline is None:
        return None, None, ""
    if args.compare is not None:
        other = load_target(args.compare)
    else:
        other = load_target(args.target, args.compare_pipeline)
    mine, theirs = lowered.layout.in_avals, other.layout.in_avals
    described = other.source if args.compare is not None else f"{other.source} after {other.pipeline}"
    if len(mine) != len(theirs):
        raise CliError(f"{described} takes {len(theirs)} arguments where {lowered.source} takes {len(mine)}: the two "
                       f"cannot run on the same inputs")
    for i, (a, b) in enumerate(zip(mine, theirs)):
        if (a.shape, a.dtype) != (b.shape, b.dtype):
            raise CliError(f"{described} takes {b.str_short()} as argument {i} where {lowered.source} takes "
                           f"{a.str_short()}: the two cannot run on the same inputs")
    compile_target(other)  # XLA's verdict on both modules before either runs
    return other, None, described


_SAVED = re.compile(r"(\d+)\.npy")


def _saved(directory: str, avals) -> list[np.ndarray]:
    count = len(avals)
    try:
        names = os.listdir(directory)
    except OSError as e:
        raise CliError(f"cannot read --expect directory {directory!r}: {e.strerror}") from None
    indices = sorted(int(m[1]) for m in map(_SAVED.fullmatch, names) if m)
    total = max([count, *(i + 1 for i in indices)])
    missing = [i for i in range(total) if i not in indices]
    if missing:
        raise CliError(f"--expect {directory!r} has no {missing[0]}.npy; it needs 0.npy ... {count - 1}.npy, one per "
                       f"result (pxla-mlir run -o {directory} writes them)")
    return [load_npy(os.path.join(directory, f"{i}.npy"), avals[i].dtype if i < count else None)
            for i in range(total)]


def _make_dir(directory: str) -> None:
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise CliError(f"cannot make the -o directory {directory!r}: {e.strerror}") from None
    if not os.access(directory, os.W_OK):
        raise CliError(f"cannot write results to {directory!r}: permission denied")


def _write(directory: str, results) -> None:
    try:
        for i, r in enumerate(results):
            save_npy(os.path.join(directory, f"{i}.npy"), r)
    except OSError as e:
        raise CliError(f"cannot write results to {directory!r}: {e.strerror}") from None
