"""Running a lowered target from the command line: its inputs (random, or
from .npy files), timed steps, and the outputs printed."""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from .errors import CliError

__all__ = ["inputs", "measure", "timing_line", "print_outputs"]


def inputs(prepared, given: list[str], seed: int) -> list:
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


def measure(fn, lower_args, call_args, calls: int, prepare_args=None):
    """Lowers, compiles and times ``fn``: the ``Lowered``, the first call's
    outputs, and seconds per step (trace, import, passes, compile, first
    call, steady-state call). ``prepare_args(lowered)`` may replace
    ``call_args`` once the layout is known."""
    import jax

    from ..stats import TIMINGS

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
