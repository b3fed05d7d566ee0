"""``pxla-mlir run --processes N``: one jax.distributed run of N local processes.

The command starts N copies of itself (:mod:`pxla_mlir.distributed.launch`:
127.0.0.1 and a free port, the run's CPU devices split evenly, a hard
deadline). Every process draws the same inputs (same seed), lowers the
target for the whole (global) inputs (or loads the .mlir module, whose
inputs are global already), places them as global jax.Arrays
laid out as the compiled program wants them (each process only its own
pieces), and times its calls; process 0 gathers the outputs. The launching
command prints every process's timings side by side, then the outputs.
With ``--launcher mpirun`` Open MPI's mpirun starts the N processes
(:mod:`pxla_mlir.distributed.mpirun`); they find their run in its
environment.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys

import numpy as np

from pxla_mlir.distributed.launch import ENV_PROCESS_ID, launch
from pxla_mlir.distributed.mpirun import ENV_LAUNCHER, MpirunError, launch_mpirun
from pxla_mlir.mlir.support.stats import TIMINGS
from pxla_mlir.tools.cmd_run_module import is_module_target, load_target
from pxla_mlir.tools.emit import prepare
from pxla_mlir.tools.errors import CliError
from pxla_mlir.tools.map_args import map_options
from pxla_mlir.tools.progress import status
from pxla_mlir.tools.running import inputs, measure, module_inputs, print_outputs, time_calls, timing_line

_RESULT = "PXLA_MP_RESULT "
_NOISE = re.compile(r"\[Gloo\]|sharding_propagation\.cc")


def run(args) -> int:
    if args.processes < 1:
        raise CliError(f"--processes must be at least 1, got {args.processes}")
    if os.environ.get(ENV_PROCESS_ID) is None and os.environ.get(ENV_LAUNCHER) is None:
        return _launch(args)
    return _worker(args)


def _cpu_device_count() -> int:
    """The CPU devices jax starts with: jax_num_cpu_devices (pxla-mlir sets it), else XLA_FLAGS's count, else 1."""
    import jax

    # jax's Config sets its options as attributes at run time, which its stubs cannot declare.
    count: int = jax.config.jax_num_cpu_devices  # pyright: ignore[reportAttributeAccessIssue]
    if count >= 0:
        return count
    match = re.search(r"xla_force_host_platform_device_count=(\d+)", os.environ.get("XLA_FLAGS", ""))
    return int(match[1]) if match else 1


def _devices_per_process(count: int) -> int:
    total = _cpu_device_count()
    if total % count:
        raise CliError(f"{total} CPU devices cannot be split evenly between {count} processes; pass --cpu-devices "
                       f"with a multiple of {count}")
    return total // count


def _launch(args) -> int:
    _check_backend()
    per = _devices_per_process(args.processes)
    if is_module_target(args.target):
        _check_module(args, per)
    else:
        _check_target(args, per)
    start = launch_mpirun if getattr(args, "launcher", "local") == "mpirun" else launch
    try:
        with status(f"running {args.target} in {args.processes} processes"):
            finished = start([sys.executable, "-m", "pxla_mlir.tools.cli", *args.argv], args.processes,
                             timeout_s=args.timeout, cpu_devices=per)
    except MpirunError as e:
        raise CliError(str(e)) from None
    found = [_result(f.output) for f in finished]
    results = [r for r in found if r is not None]
    if any(f.returncode != 0 for f in finished) or len(results) < len(found):
        for f in finished:
            lines = [line for line in f.output.splitlines() if not _NOISE.search(line)]
            print(f"--- process {f.index}: {f.describe()}\n" + "\n".join(lines[-15:]), file=sys.stderr)
        raise CliError(f"the {args.processes}-process run failed: "
                       + "; ".join(f"process {f.index} {f.describe()}" for f in finished))
    first = results[0]
    by = " started by mpirun" if getattr(args, "launcher", "local") == "mpirun" else ""
    print(f"ran on {first['devices']} {first['platform'].upper()} devices in {args.processes} processes{by} "
          f"({per} each); pipeline {first['pipeline']}", file=sys.stderr)
    if first.get("layout"):
        print(f"layout: {first['layout']}", file=sys.stderr)
    header = "".join(f"{'process ' + str(r['process']):>13}" for r in results)
    print(f"  {'':<22}{header}")
    for name in first["timings"]:
        cells = "".join(_cell(name, r["timings"][name]) for r in results)
        note = f"  (mean of {args.calls})" if name == "steady-state call" else ""
        print(f"  {name:<22}{cells}{note}")
    sys.stdout.write(first["outputs"])
    return 0


def _check_backend() -> None:
    """The devices the processes would run on can start (here first: the split below counts them)."""
    import jax

    from pxla_mlir.mlir.sharding.devices import backend_error

    try:
        jax.devices()
    except (AssertionError, RuntimeError) as e:
        clear = backend_error(e, "pxla-mlir run --processes")
        if clear is None:
            raise
        raise clear from None


def _check_module(args, per: int) -> None:
    """The module and its inputs checked here, on as many local devices as the
    processes have together: a mistake is one line, not one per process."""
    lowered = load_target(args.target, args.pipeline)
    module_inputs(lowered.layout.in_avals, args.input, args.arg, args.seed, lowered.source)
    lowered.compile()  # the module's own mistakes first
    _check_shares(lowered.source, len(lowered.devices), args.processes, per)


def _check_target(args, per: int) -> None:
    """A Python target lowered here (not compiled) on as many local devices as
    the processes have together, for the devices its map runs on."""
    prepared = prepare(args.target, map_options(args))
    inputs(prepared, args.input, args.seed)
    with prepared.context():
        lowered = prepared.fn.lower(*[a.struct() for a in prepared.args])
    _check_shares(args.target, len(lowered.devices), args.processes, per)


def _check_shares(what: str, n: int, count: int, per: int) -> None:
    """A run of ``count`` processes of ``per`` devices each gives a program of
    ``n`` devices ``n / count`` of each process's (as every process would find
    before running, in the words of the Python API): say it in flags."""
    if n % count:
        fits = [d for d in range(2, n + 1) if n % d == 0][:4]
        how = " or ".join(f"--processes {d}" for d in fits)
        how = f"run it with {how} (a count that divides {n}, with --cpu-devices a multiple of it)" if fits else \
            "run it without --processes"
        raise CliError(f"{what} runs on {n} device{'s' if n > 1 else ''}, which --processes {count} cannot split "
                       f"evenly (every process "
                       f"feeds an equal share of them); {how}")
    if n // count > per:
        raise CliError(f"{what} runs on {n} devices, {n // count} on each of the {count} processes, but each process "
                       f"has {per} CPU devices; pass --cpu-devices {n} (or more, a multiple of {count})")


def _cell(name: str, seconds: float) -> str:
    return f"{seconds * 1e3:10.3f} ms" if name == "steady-state call" else f"{seconds * 1e3:10.2f} ms"


def _result(output: str) -> dict | None:
    for line in output.splitlines():
        if line.startswith(_RESULT):
            return json.loads(line[len(_RESULT):])
    return None


def _worker(args) -> int:
    import pxla_mlir.distributed as distributed

    distributed.initialize()
    import jax
    from jax.experimental import multihost_utils

    if is_module_target(args.target):  # the module's global inputs, laid out as its executable wants them
        TIMINGS.clear()
        lowered = load_target(args.target, args.pipeline)
        values = module_inputs(lowered.layout.in_avals, args.input, args.arg, args.seed, lowered.source)
        outs, timings = time_calls(lowered, None, args.calls, steps=("passes", "compile"),
                                   prepare_args=lambda compiled: _global_inputs(compiled, values))
        gathered = multihost_utils.process_allgather(outs, tiled=True)
    else:
        prepared = prepare(args.target, map_options(args))
        values = inputs(prepared, args.input, args.seed)
        everywhere = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(jax.devices()), ("all",)),
                                                jax.sharding.PartitionSpec())
        structs = [jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=everywhere) for v in values]  # global values
        with prepared.context():
            lowered, outs, timings = measure(prepared.fn, structs, None, args.calls,
                                             prepare_args=lambda compiled: _global_inputs(compiled, values))
            gathered = multihost_utils.process_allgather(outs, tiled=True)
    printed = io.StringIO()
    if jax.process_index() == 0:
        with contextlib.redirect_stdout(printed):
            print_outputs(gathered)
    devices = lowered.devices
    print(_RESULT + json.dumps({"process": jax.process_index(), "devices": len(devices),
                                "platform": devices[0].platform, "pipeline": lowered.pipeline,
                                "layout": getattr(lowered, "layout_note", None),
                                "timings": timings, "outputs": printed.getvalue()}), flush=True)
    for name, seconds in timings.items():  # also readable in the process's own log
        print(timing_line(name, seconds, args.calls))
    return 0


def _global_inputs(compiled, values) -> list:
    """The whole host values as global jax.Arrays laid out as ``compiled``'s inputs."""
    import jax

    shardings = compiled.executable.in_shardings[len(compiled.consts):]
    arrays = [jax.make_array_from_callback(np.shape(v), s, lambda index, v=v: v[index])
              for v, s in zip(compiled.signature.flatten(values), shardings)]
    return list(jax.tree_util.tree_unflatten(compiled.signature.in_tree, arrays))
