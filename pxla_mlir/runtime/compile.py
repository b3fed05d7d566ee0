"""Compile a final MHLO module through jaxlib: replica/partition counts come
from the module's own attributes, devices from the caller.

Warm starts: with jax's persistent compilation cache on (jax's
``jax_compilation_cache_dir``, or :func:`enable_compilation_cache`, or the
``PXLA_MLIR_CACHE_DIR`` environment variable), a process compiling a module
another process compiled before loads the executable from the cache instead,
once the entry is shown to hold that very program (:mod:`.persistent_cache`).
It is off by default, as in jax.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
from jaxlib.mlir import ir

from .. import jax_internals
from ..ir.pxla_attrs import device_counts
from ..ir.shardy import uses_shardy
from .persistent_cache import load_or_compile

__all__ = ["compile_module", "enable_compilation_cache", "CACHE_DIR_ENV", "to_xla_computation"]

#: Environment variable that turns the persistent cache on (its value: the directory).
CACHE_DIR_ENV = "PXLA_MLIR_CACHE_DIR"
_env_applied = False


def enable_compilation_cache(path: str, *, min_compile_time_secs: float = 0.0) -> None:
    """Keeps compiled executables in ``path`` (jax's persistent compilation
    cache, shared with jax.jit) and loads them from there in later processes.
    ``min_compile_time_secs``: only programs that took at least this long to
    compile are written (jax's default is 1 s; 0 keeps every program)."""
    os.makedirs(path, exist_ok=True)
    jax_internals.enable_persistent_cache(os.path.abspath(path), min_compile_time_secs)


def _apply_env() -> None:
    global _env_applied
    if not _env_applied:
        _env_applied = True
        path = os.environ.get(CACHE_DIR_ENV)
        if path and not jax_internals.persistent_cache_enabled():
            enable_compilation_cache(path)


def compile_module(module: ir.Module, devices: Sequence, *, platform: str | None = None,
                   compiler_options: dict | None = None, host_callbacks: Sequence = (), expected=None):
    """A LoadedExecutable of ``module`` on ``devices`` (replica-major order).

    Partition-mode modules compile with XLA's SPMD partitioner (on CPU a
    multi-partition program always needs it); Shardy partitions modules in
    the sdy form, GSPMD the others. ``compiler_options`` are XLA debug options
    by name; ``host_callbacks`` the callables the module's host callbacks call.
    ``expected``: the per-device (shape, dtype) of the parameters and results,
    which an executable loaded from the persistent cache must have.
    """
    replicas, partitions = device_counts(module.operation)
    if len(devices) != replicas * partitions:
        raise ValueError(f"the module needs {replicas * partitions} devices (num_replicas = {replicas}, "
                         f"num_partitions = {partitions}), got {len(devices)}")
    ids = np.array([d.id for d in devices]).reshape(replicas, partitions)
    options = _checked_options(compiler_options)
    sdy = uses_shardy(module.operation)
    opts = jax_internals.compile_options(replicas, partitions, ids, spmd=partitions > 1 or sdy, shardy=sdy,
                                         overrides=options)
    _apply_env()
    try:
        # Only the ir.Module overload of compile_and_load takes host callbacks; their programs are never
        # cached (as in jax: the callables' addresses are part of the program).
        if host_callbacks:
            return jax_internals.compile_and_load(module, devices, opts, platform, host_callbacks=host_callbacks)
        text = module.operation.get_asm(enable_debug_info=False)
        if jax_internals.persistent_cache_enabled():
            return load_or_compile(module, text, devices, ids, opts, platform, expected=expected,
                                   compile=lambda: jax_internals.compile_and_load(text, devices, opts, platform))
        return jax_internals.compile_and_load(text, devices, opts, platform)
    except jax_internals.JaxRuntimeError as e:
        if options and ("compile option" in str(e) or "While setting option" in str(e)):
            raise ValueError(f"compiler_options: {str(e).removeprefix('INVALID_ARGUMENT: ').rstrip('.')}. Keys are XLA "
                             f"debug option names as in XLA_FLAGS without the leading '--' (e.g. "
                             f"'xla_cpu_enable_fast_math'), values bool, int, float or str") from None
        raise


def _checked_options(options) -> dict | None:
    if options is None:
        return None
    if not isinstance(options, dict):
        raise TypeError(f"compiler_options must be a dict of XLA option names to values, got {options!r}")
    for name, value in options.items():
        if not isinstance(name, str):
            raise TypeError(f"compiler_options keys must be XLA option names (str), got {name!r}")
        if not isinstance(value, (bool, int, float, str)):
            raise TypeError(f"compiler_options[{name!r}] must be a bool, int, float or str, got {value!r}")
    return dict(options)


def to_xla_computation(module: ir.Module):
    """XLA's HLO (``XlaComputation``) of a final MHLO module."""
    return jax_internals.xla_computation(module.operation.get_asm(enable_debug_info=True))
