"""Compile a final MHLO module through jaxlib: replica/partition counts come
from the module's own attributes, devices from the caller.

Warm starts: with jax's persistent compilation cache on (jax's
``jax_compilation_cache_dir``, or :func:`enable_compilation_cache`, or the
``PXLA_MLIR_CACHE_DIR`` environment variable), a process compiling a module
another process compiled before loads the executable from the cache instead,
once the entry is shown to hold that very program (:mod:`.persistent_cache`).
It is off by default, as in jax.

Within a process, lowerings of the same program share its executable while
any of them holds it (:func:`compile_program`): closed-over arrays are
arguments of the program, so closures over other arrays of the same shapes
and dtypes compile once.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np
from jaxlib.mlir import ir

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.jaxbridge import cache_access, executables, jax_internals
from pxla_mlir.mlir.support.stats import STATS
from pxla_mlir.runtime.debug_flags import dump_stage, dumping
from pxla_mlir.runtime.module_facts import KNOWN_CRASH, ModuleToCompile
from pxla_mlir.runtime.persistent_cache import load_or_compile

__all__ = ["compile_module", "compile_program", "Program", "enable_compilation_cache", "CacheDirError",
           "ReplicaShardingError", "CACHE_DIR_ENV", "to_xla_computation", "CompilerOptionsError", "PlatformMismatchError",
           "device_platform"]

#: Environment variable that turns the persistent cache on (its value: the directory).
CACHE_DIR_ENV = "PXLA_MLIR_CACHE_DIR"
_env_applied = False

#: Live programs by what decides them (see _program_key). Weak: a program shared by nobody is freed, as the
#: map caches that hold its Compiled drop it.
_shared: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_shared_lock = threading.Lock()


class CacheDirError(PxlaUserError, ValueError):
    """The persistent compilation cache's directory cannot be used."""


class CompilerOptionsError(jax_internals.JaxRuntimeError, PxlaUserError):
    """XLA refused a ``compiler_options`` entry: jax's ``JaxRuntimeError`` with XLA's text, and how to fix it."""


class PlatformMismatchError(PxlaUserError, ValueError):
    """Devices of several platforms, or of another platform than the one asked for (``backend=``)."""


class ReplicaShardingError(PxlaUserError, ValueError):
    """A module jaxlib would compile and then abort the process running (see
    :mod:`pxla_mlir.mlir.core.replica_shardings`)."""


class KnownCrashError(PxlaUserError, ValueError):
    """A module the installed jaxlib's compiler would crash the process on."""


def enable_compilation_cache(path: str, *, min_compile_time_secs: float = 0.0) -> None:
    """Keeps compiled executables in ``path`` (jax's persistent compilation
    cache, shared with jax.jit) and loads them from there in later processes.
    ``min_compile_time_secs``: only programs that took at least this long to
    compile are written (jax's default is 1 s; 0 keeps every program)."""
    path = _usable_cache_dir(path, "enable_compilation_cache(path)")
    cache_access.enable_persistent_cache(path, min_compile_time_secs)


def _usable_cache_dir(path, source: str) -> str:
    """``path`` as an absolute directory, created if needed and writable, or a
    :class:`CacheDirError` saying what is wrong with it and how to fix it."""
    fix = ("set it to a directory this process may create and write" if source == CACHE_DIR_ENV
           else "pass a directory this process may create and write")
    fix += f" (or unset {CACHE_DIR_ENV} to compile without the cache)" if source == CACHE_DIR_ENV else ""
    where = f"{CACHE_DIR_ENV}={str(path)!r}" if source == CACHE_DIR_ENV else f"{source} = {path!r}"
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{where}: the compilation cache needs a directory path (str or os.PathLike)")
    path = os.fspath(path)
    if not path.strip():
        raise CacheDirError(f"{where}: the compilation cache needs a directory path, got an empty one; {fix}")
    full = os.path.abspath(os.path.expanduser(path))
    blocker = _file_on_the_way(full)
    if blocker == full:
        raise CacheDirError(f"{where}: {full} exists and is not a directory; {fix}")
    if blocker is not None:
        raise CacheDirError(f"{where}: {full} cannot be created: {blocker} is not a directory; {fix}")
    try:
        os.makedirs(full, exist_ok=True)
        with tempfile.TemporaryFile(dir=full):
            pass
    except OSError as e:
        raise CacheDirError(f"{where}: cannot create or write the directory {full} ({e.strerror or e}); "
                            f"{fix}") from None
    return full


def _file_on_the_way(path: str) -> str | None:
    """The first of ``path`` and its parents that exists and is not a directory."""
    probe = path
    while True:
        if os.path.lexists(probe):
            return None if os.path.isdir(probe) else probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent


def apply_cache_env() -> None:
    """Turns the persistent cache on if ``PXLA_MLIR_CACHE_DIR`` says so (once it works)."""
    global _env_applied
    if not _env_applied:
        path = os.environ.get(CACHE_DIR_ENV)
        if path and not cache_access.persistent_cache_enabled():
            # Checked on every compile until it works: a bad directory is an error each time, never skipped.
            cache_access.enable_persistent_cache(_usable_cache_dir(path, CACHE_DIR_ENV), 0.0)
        _env_applied = True


# The return type is jaxlib's class, which a table gives as a value (and jaxlib ships no stubs for).
def compile_options(num_replicas: int, num_partitions: int, device_ids: np.ndarray, *,
                    spmd: bool = False, shardy: bool = False, overrides: dict | None = None,
                    platform: str | None = None) -> jax_internals.xc.CompileOptions:  # pyright: ignore[reportInvalidTypeForm]
    """CompileOptions for a replica- or partition-mode module on given devices:
    jax's own (its effort and memory-fitting levels, profile version, debug
    options from jax's flags), but for the partitioner settings.

    ``device_ids`` has shape (num_replicas, num_partitions). ``shardy`` must
    follow the module's form: Shardy (sdy) modules fail to compile without it,
    GSPMD (mhlo.sharding) modules fall back to GSPMD with a warning with it.
    ``overrides`` are XLA debug options by name (jax's ``compiler_options``),
    checked by XLA when compiling.
    """
    ids = np.asarray(device_ids).reshape(num_replicas, num_partitions)
    opts = jax_internals.compiler.get_compile_options(num_replicas, num_partitions, device_assignment=ids,
                                                      env_options_overrides=overrides or None,
                                                      backend=jax_internals.backend(platform))
    build = opts.executable_build_options
    build.num_replicas = num_replicas
    build.num_partitions = num_partitions
    build.use_spmd_partitioning = spmd
    build.use_shardy_partitioner = shardy
    return opts


def device_platform(devices: Sequence, platform: str | None = None) -> str:
    """The platform of ``devices``, which compiles, caches and runs their
    program (jaxlib's client of those devices, not the default backend's).
    ``platform``, when given, must be theirs: a :class:`PlatformMismatchError`
    before anything reaches XLA otherwise."""
    found = sorted({d.platform for d in devices})
    if len(found) != 1:
        raise PlatformMismatchError(f"one program runs on devices of one platform, got devices of {found}: "
                                    f"{list(devices)}")
    if platform is not None and platform != found[0]:
        raise PlatformMismatchError(f"cannot compile for platform {platform!r} on {found[0].upper()} devices "
                                    f"({list(devices)[:4]}{'...' if len(devices) > 4 else ''}); pass devices of "
                                    f"{platform!r} (jax.devices({platform!r})) or leave the platform out")
    return found[0]


class Program:
    """A compiled executable (``xla``, jaxlib's ``LoadedExecutable``), which
    cannot be referenced weakly; whoever runs it holds this to keep it shared."""

    __slots__ = ("xla", "__weakref__")

    def __init__(self, xla):
        self.xla = xla


def compile_module(module: ir.Module, devices: Sequence, *, platform: str | None = None,
                   compiler_options: dict | None = None, host_callbacks: Sequence = (), expected=None):
    """A LoadedExecutable of ``module`` on ``devices``, compiled for the caller alone (see :func:`compile_program`)."""
    return compile_program(module, devices, platform=platform, compiler_options=compiler_options,
                           host_callbacks=host_callbacks, expected=expected).xla


def compile_program(module: ir.Module | ModuleToCompile, devices: Sequence, *, platform: str | None = None,
                    compiler_options: dict | None = None, host_callbacks: Sequence = (), expected=None,
                    share: bool = False, logged: Callable[[str], contextlib.AbstractContextManager] | None = None
                    ) -> Program:
    """The :class:`Program` (a LoadedExecutable) of ``module`` on ``devices`` (replica-major order).

    Partition-mode modules compile with XLA's SPMD partitioner (on CPU a
    multi-partition program always needs it); Shardy partitions modules in
    the sdy form, GSPMD the others. ``compiler_options`` are XLA debug options
    by name; ``host_callbacks`` the callables the module's host callbacks call.
    ``expected``: the per-device (shape, dtype) of the parameters and results,
    which an executable loaded from the persistent cache must have.
    ``platform`` (optional) must be the devices' own: the devices' client
    compiles (:func:`device_platform`).
    ``share``: the Program of an equal module (MHLO without locations, XLA's
    options, devices) compiled before with ``share`` and still held by someone
    is returned instead of compiling; only for a module whose text alone decides
    what it computes (no host callbacks, nothing of jax's lowering kept alive
    for it). ``logged``: a context around the XLA compile itself (jax_log_compiles),
    given the module's name.

    ``module`` may be a :class:`ModuleToCompile` that knows the module's facts
    without the module: then a program loaded from the persistent cache (or
    shared) is never parsed or printed.
    """
    subject = module if isinstance(module, ModuleToCompile) else ModuleToCompile(module)
    facts = subject.facts
    replicas, partitions = facts.replicas, facts.partitions
    if len(devices) != replicas * partitions:
        raise ValueError(f"the module needs {replicas * partitions} devices (num_replicas = {replicas}, "
                         f"num_partitions = {partitions}), got {len(devices)}")
    if facts.refusal is not None:
        kind, why = facts.refusal
        raise (KnownCrashError if kind == KNOWN_CRASH else ReplicaShardingError)(f"cannot compile the module: {why}")
    ids = np.array([d.id for d in devices]).reshape(replicas, partitions)
    options = _checked_options(compiler_options)
    platform = device_platform(devices, platform)
    opts = compile_options(replicas, partitions, ids, spmd=partitions > 1 or facts.shardy, shardy=facts.shardy,
                           overrides=options, platform=platform)
    apply_cache_env()
    compiling = (lambda: logged(facts.name or "module")) if logged else contextlib.nullcontext
    try:
        if dumping():
            dump_stage(subject.module, "compile")  # jax_dump_ir_to
        # Only the ir.Module overload of compile_and_load takes host callbacks; their programs are never
        # cached (as in jax: the callables' addresses are part of the program).
        if host_callbacks:
            with compiling():
                STATS["compiles"] += 1
                return Program(executables.compile_and_load(subject.module, devices, opts,
                                                            host_callbacks=host_callbacks))
        key = _program_key(facts.digest, opts, devices) if share else None
        with _shared_lock:
            program = _shared.get(key) if key is not None else None
        if program is None:
            with compiling():
                program = Program(_compile_text(subject, devices, ids, opts, platform, expected))
            if key is not None:
                with _shared_lock:
                    _shared[key] = program
        return program
    except jax_internals.JaxRuntimeError as e:
        if options and ("compile option" in str(e) or "While setting option" in str(e)):
            raise CompilerOptionsError(f"{str(e).rstrip('.')}. compiler_options keys are XLA debug option names as in "
                                       f"XLA_FLAGS without the leading '--' (e.g. 'xla_cpu_enable_fast_math'), values "
                                       f"bool, int, float or str") from None
        raise


def _compile_text(subject: ModuleToCompile, devices: Sequence, ids: np.ndarray, opts, platform: str, expected):
    """The module compiled from its text, or loaded from the persistent cache (then never printed)."""
    STATS["compiles"] += 1
    if cache_access.persistent_cache_used(platform):
        return load_or_compile(subject.facts, devices, ids, opts, platform, expected=expected,
                               compile=lambda: executables.compile_and_load(subject.text, devices, opts))
    if cache_access.cache_gate_open(platform):  # jax's gate with no cache: every compile is after a miss
        jax_internals.util.test_event("compile_after_persistent_compilation_miss")
    return executables.compile_and_load(subject.text, devices, opts)


def _program_key(digest: bytes, opts, devices: Sequence) -> tuple:
    """What decides an executable: the program (its text's digest), XLA's options (jax's flags among them) and
    the devices."""
    return digest, hashlib.sha256(opts.SerializeAsString()).digest(), tuple(devices)


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
    return executables.xla_computation(cast(str, module.operation.get_asm(enable_debug_info=True)))
