"""Running a lowered target from the command line: its inputs (random, or
from .npy files), timed steps, and the outputs printed."""

from __future__ import annotations

import time

import numpy as np

from pxla_mlir.tools.errors import CliError
from pxla_mlir.tools.progress import status
from pxla_mlir.tools.targets import ArgSpec, arg_specs

__all__ = ["inputs", "module_inputs", "load_npy", "save_npy", "measure", "time_calls", "timing_line", "print_outputs"]


def inputs(prepared, given: list[str], seed: int) -> list:
    rng = np.random.default_rng(seed)
    values = [spec.random(rng) for spec in prepared.args]
    for index, path in _given(given, len(values)):
        spec = prepared.args[index]
        loaded = load_npy(path, spec.dtype)
        if loaded.shape != spec.shape:
            raise CliError(f"{path!r} has shape {loaded.shape}, argument {index} is {spec}")
        values[index] = loaded.astype(spec.dtype)
    return values


def module_inputs(avals, given: list[str], arg_texts: list[str], seed: int, where: str) -> list:
    """Inputs of a module's @main (``avals``: its global arguments): random
    (``seed``), or from .npy files of exactly the argument's shape and dtype;
    ``--arg`` shapes, if given, must be the module's."""
    from pxla_mlir.stages.signature import narrowed_without_x64

    specs = [ArgSpec(np.dtype(av.dtype).name, tuple(av.shape)) for av in avals]
    narrowed = [(i, s) for i, s in enumerate(specs) if narrowed_without_x64(s.dtype)]
    if narrowed:
        from jax import dtypes

        i, spec = narrowed[0]
        as_32 = ArgSpec(dtypes.canonicalize_dtype(spec.dtype).name, spec.shape)
        raise CliError(f"argument {i} of {where} is {spec}, but jax's 64-bit types are off (jax_enable_x64): jax would "
                       f"pass it as {as_32}; run with JAX_ENABLE_X64=1 in the environment (JAX_ENABLE_X64=1 pxla-mlir "
                       f"run ...) to pass 64-bit values")
    if arg_texts:
        declared = arg_specs(arg_texts)
        if len(declared) != len(specs):
            raise CliError(f"{len(declared)} --arg given, but @main of {where} takes {len(specs)} arguments"
                           + (f": {', '.join(map(str, specs))}" if specs else ""))
        for i, (d, s) in enumerate(zip(declared, specs)):
            if d != s:
                raise CliError(f"--arg {d} for argument {i}, but @main of {where} takes {s}")
    rng = np.random.default_rng(seed)
    values = [spec.random(rng) for spec in specs]
    for index, path in _given(given, len(values)):
        loaded = load_npy(path, specs[index].dtype)
        got = ArgSpec(loaded.dtype.name, loaded.shape)
        if got != specs[index]:
            raise CliError(f"argument {index} of {where} is {specs[index]}, but {path!r} holds {got}")
        values[index] = loaded
    return values


def _given(given: list[str], count: int):
    """(index, path) of each ``--input N=FILE.npy``."""
    for item in given:
        index, eq, path = item.partition("=")
        if not eq or not index.isdigit() or not int(index) < count:
            raise CliError(f"--input must be N=FILE.npy with 0 <= N < {count}, got {item!r}")
        yield int(index), path


def _npy_names(dtype: np.dtype) -> bool:
    """Whether a .npy header can name ``dtype``. It cannot name jax's extra
    dtypes (bfloat16, float8_*, float4_*): numpy.save writes most as raw
    bytes (``|V2``), but float8_e5m2 as ``<f1``, which numpy.load refuses."""
    try:
        return np.dtype(dtype.str) == dtype
    except TypeError:
        return False


def save_npy(path: str, array: np.ndarray) -> None:
    """``array`` as a .npy file that :func:`load_npy` reads back as its dtype
    (raw bytes where the format cannot name the dtype)."""
    array = np.asarray(array)
    if not _npy_names(array.dtype):
        array = array.view(f"V{array.dtype.itemsize}")
    np.save(path, array)


def load_npy(path: str, dtype=None) -> np.ndarray:
    """A .npy file's array; raw bytes of ``dtype``'s size are read as
    ``dtype`` where the format cannot name it (see :func:`save_npy`)."""
    import jax.numpy as jnp

    want = None if dtype is None else jnp.dtype(dtype)
    try:
        with open(path, "rb") as f:
            if f.read(6) != b"\x93NUMPY":
                raise CliError(f"{path!r} is not a .npy file (write one with numpy.save)")
            f.seek(0)
            loaded = np.load(f, allow_pickle=False)
    except OSError as e:
        raise CliError(f"cannot load {path!r}: {e.strerror}") from None
    except ValueError as e:
        hint = "" if want is None or _npy_names(want) else \
            f" (numpy.save cannot write {want.name} readably: save array.view('V{want.itemsize}') instead)"
        raise CliError(f"cannot load {path!r}: {e}{hint}") from None
    if want is not None and loaded.dtype.kind == "V" and loaded.dtype.fields is None and not _npy_names(want) \
            and loaded.dtype.itemsize == want.itemsize:
        loaded = loaded.view(want)
    return loaded


def measure(fn, lower_args, call_args, calls: int, prepare_args=None):
    """Lowers, compiles and times ``fn``: the ``Lowered``, the first call's
    outputs, and seconds per step (trace, import, passes, compile, first
    call, steady-state call). ``prepare_args(compiled)`` may replace
    ``call_args`` once the layout is known."""
    from pxla_mlir.mlir.support.stats import TIMINGS

    TIMINGS.clear()
    with status(f"lowering {getattr(fn, '__name__', 'the function')}"):
        lowered = fn.lower(*lower_args)
    outs, timings = time_calls(lowered, call_args, calls, prepare_args)
    return lowered, outs, timings


def time_calls(lowered, call_args, calls: int, prepare_args=None, steps=("trace", "import", "passes", "compile")):
    """Compiles ``lowered`` and times its calls: the first call's outputs and
    seconds per step (``steps`` from the stats since they were last cleared,
    then first call, steady-state call)."""
    import jax

    from pxla_mlir.mlir.support.stats import TIMINGS

    with status(f"compiling for {len(lowered.devices)} devices"):
        compiled = lowered.compile()
    if prepare_args is not None:
        call_args = prepare_args(compiled)
    with status("running the first call"):
        t = time.perf_counter()
        outs = jax.block_until_ready(compiled(*call_args))
        first = time.perf_counter() - t
    with status(f"timing {max(calls, 1)} calls"):
        t = time.perf_counter()
        for _ in range(max(calls, 1)):
            jax.block_until_ready(compiled(*call_args))
        steady = (time.perf_counter() - t) / max(calls, 1)
    timings = {name: TIMINGS[name] for name in steps}
    timings.update({"first call": first, "steady-state call": steady})
    return outs, timings


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

