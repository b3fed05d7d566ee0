"""Compile a final MHLO module through jaxlib: replica/partition counts come
from the module's own attributes, devices from the caller.

Warm starts: with jax's persistent compilation cache on (jax's
``jax_compilation_cache_dir``, or :func:`enable_compilation_cache`, or the
``PXLA_MLIR_CACHE_DIR`` environment variable), a process compiling a module
another process compiled before loads the executable from the cache instead.
It is off by default, as in jax.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
from jaxlib.mlir import ir

from .. import jax_internals
from ..errors import PxlaUserError
from ..ir.pxla_attrs import device_counts
from ..ir.shardy import uses_shardy

__all__ = ["compile_module", "enable_compilation_cache", "CACHE_DIR_ENV", "to_xla_computation", "CompilerOptionsError"]

#: Environment variable that turns the persistent cache on (its value: the directory).
CACHE_DIR_ENV = "PXLA_MLIR_CACHE_DIR"
_env_applied = False


class CompilerOptionsError(jax_internals.JaxRuntimeError, PxlaUserError):
    """XLA refused a ``compiler_options`` entry: jax's ``JaxRuntimeError`` with XLA's text, and how to fix it."""


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
                   compiler_options: dict | None = None, host_callbacks: Sequence = ()):
    """A LoadedExecutable of ``module`` on ``devices`` (replica-major order).

    Partition-mode modules compile with XLA's SPMD partitioner (on CPU a
    multi-partition program always needs it); Shardy partitions modules in
    the sdy form, GSPMD the others. ``compiler_options`` are XLA debug options
    by name; ``host_callbacks`` the callables the module's host callbacks call.
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
        if jax_internals.persistent_cache_used(platform or devices[0].platform):
            # jax's cache keys on the module (without locations), the options and
            # the devices; it compiles the module object itself: give it a copy.
            return jax_internals.compile_or_get_cached(_copy(module), devices, ids, opts, platform, host_callbacks)
        # Only the ir.Module overload of compile_and_load takes host callbacks.
        program = module if host_callbacks else module.operation.get_asm(enable_debug_info=False)
        return jax_internals.compile_and_load(program, devices, opts, platform, host_callbacks=host_callbacks)
    except jax_internals.JaxRuntimeError as e:
        if options and ("compile option" in str(e) or "While setting option" in str(e)):
            raise CompilerOptionsError(f"{str(e).rstrip('.')}. compiler_options keys are XLA debug option names as in "
                                       f"XLA_FLAGS without the leading '--' (e.g. 'xla_cpu_enable_fast_math'), values "
                                       f"bool, int, float or str") from None
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


def _copy(module: ir.Module) -> ir.Module:
    with module.context:
        return ir.Module.parse(module.operation.get_asm(enable_debug_info=False))
