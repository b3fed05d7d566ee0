"""jax's persistent compilation cache, reached as jax.jit reaches it: whether
it is on, its keys, and its entries read, written and removed.

Built on the private names of :mod:`.jax_internals`; the client is looked up
there at each call (``jax_internals.backend``), so that a test which replaces
the default backend replaces it here too. What pxla_mlir stores in the cache
and how it checks an entry is :mod:`pxla_mlir.runtime.persistent_cache`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import stat
import tempfile
import threading
from collections.abc import Sequence

import numpy as np

from pxla_mlir.jaxbridge import jax_internals
from pxla_mlir.jaxbridge.jax_internals import compilation_cache, config, jax_distributed, lru_cache

__all__ = ["UnreadableEntry", "cache_gate_open", "cache_key", "cache_read", "cache_remove", "cache_write",
           "enable_persistent_cache", "is_process_zero", "persistent_cache_enabled", "persistent_cache_thresholds",
           "persistent_cache_used"]


class UnreadableEntry(Exception):
    """A cache entry that is there but cannot be read as one (a directory, a FIFO, a dangling link, no
    permission): the message says which."""


def persistent_cache_enabled() -> bool:
    """Is a persistent cache directory set (jax's or ours)?"""
    return bool(config.compilation_cache_dir.value)


def persistent_cache_used(platform: str | None = None) -> bool:
    """Do compiles go through the persistent cache, as jax.jit's do: jax's own
    gate (``is_cache_used``: ``jax_enable_compilation_cache`` on, a platform
    that can serialize executables) says yes and jax has a cache (one made from
    ``jax_compilation_cache_dir``, or one set in its place, as jax's tests do)."""
    return compilation_cache.is_cache_used(jax_internals.backend(platform)) and \
        compilation_cache._get_cache(jax_internals.backend(platform)) is not None


def cache_gate_open(platform: str | None = None) -> bool:
    """jax's ``is_cache_used`` alone: jax counts every compile under it as one
    after a persistent-cache miss, a cache or none."""
    return compilation_cache.is_cache_used(jax_internals.backend(platform))


def enable_persistent_cache(path: str, min_compile_time_secs: float) -> None:
    """Points jax's persistent compilation cache at ``path``. jax decides once
    per process whether the cache is used: reset that decision."""
    config.update("jax_compilation_cache_dir", path)
    config.update("jax_persistent_cache_min_compile_time_secs", min_compile_time_secs)
    compilation_cache.reset_cache()


def cache_key(name: str, program_digest: bytes, devices: Sequence, device_ids: np.ndarray, options,
              platform: str | None = None) -> str:
    """A persistent-cache key of the program ``name`` whose text has the
    digest ``program_digest``: jax's key (the compile options, an
    ``xc.CompileOptions``, the devices, the jaxlib version, XLA's flags) with
    that digest in place of jax's hash of the module, which would need the
    module parsed. jax hashes the rest of a stand-in module's key as it would
    hash a real one's, so whatever jax adds to its keys is in ours too."""
    grid = np.array(list(devices), dtype=object).reshape(device_ids.shape)
    with _stand_in_lock:
        theirs = compilation_cache.get_cache_key(_stand_in_module(), grid, options, jax_internals.backend(platform))
    h = hashlib.sha256(b"pxla-mlir program\0")
    h.update(program_digest)
    h.update(theirs.encode())
    return f"{name}-{h.hexdigest()}"


_stand_in_lock = threading.Lock()  # jax's key clones the module in its context: one thread at a time


@functools.cache
def _stand_in_module():
    """An empty module in a bare context of its own: none of jax's dialects is loaded for it."""
    from jaxlib.mlir import ir

    with ir.Context(), ir.Location.unknown():
        return ir.Module.parse("module @program {}")


def cache_read(key: str, platform: str | None = None) -> bytes | None:
    """The bytes stored under ``key`` in jax's persistent cache (None: none, or the cache is off). Raises
    :class:`UnreadableEntry` for an entry that is not a regular file one can read: jax's own ``get`` would
    raise for a directory or a missing permission, and block forever on a FIFO."""
    cache = compilation_cache._get_cache(jax_internals.backend(platform))
    if cache is None:
        return None
    path = _entry_path(cache, key)
    if path is not None:
        _check_readable(path)
    try:
        return cache.get(key)
    except OSError as e:
        raise UnreadableEntry(f"it cannot be read ({type(e).__name__}: {e.strerror or e})") from None


def _entry_path(cache, key: str) -> str | None:
    """The file of ``key`` in a local cache directory; None for another kind of cache."""
    path = getattr(getattr(cache, "_base_cache", cache), "path", None)
    if not isinstance(path, os.PathLike):
        return None
    return os.path.join(os.fspath(path), f"{key}{lru_cache._CACHE_SUFFIX}")


def _check_readable(path: str) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return  # no entry
    except OSError as e:
        raise UnreadableEntry(f"it cannot be read ({type(e).__name__}: {e.strerror or e})") from None
    if stat.S_ISLNK(st.st_mode):
        try:
            st = os.stat(path)
        except OSError:
            raise UnreadableEntry("it is a symbolic link to nothing") from None
    if stat.S_ISDIR(st.st_mode):
        raise UnreadableEntry("it is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableEntry("it is not a regular file (a FIFO, a socket or a device)")
    if not os.access(path, os.R_OK):
        raise UnreadableEntry("it cannot be read (permission denied)")


def cache_write(key: str, value: bytes, platform: str | None = None) -> None:
    """Stores ``value`` under ``key`` (jax's cache keeps an entry that exists: remove it first).

    In a local directory the entry appears whole or not at all: written to a
    temporary file beside it, then renamed (jax's own ``put`` writes in place,
    so a process starting at the same moment could read half an entry).
    With jax's size-bounded cache (``jax_compilation_cache_max_size``) jax's
    ``put`` does the writing, under its file lock, to keep its accounting."""
    cache = compilation_cache._get_cache(jax_internals.backend(platform))
    if cache is None:
        return
    base = getattr(cache, "_base_cache", cache)
    path = getattr(base, "path", None)
    if path is None or getattr(base, "eviction_enabled", False) or not isinstance(path, os.PathLike):
        cache.put(key, value)
        return
    target = os.path.join(os.fspath(path), f"{key}{lru_cache._CACHE_SUFFIX}")
    if os.path.exists(target):
        return
    try:
        fd, tmp = tempfile.mkstemp(dir=os.fspath(path), prefix=".pxla-tmp-")
    except OSError:  # a read-only cache directory: the program still runs, as with jax's put
        return
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(value)
        os.replace(tmp, target)
    except OSError:  # a full disk: no entry
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def cache_remove(key: str, platform: str | None = None) -> bool:
    """Removes the entry under ``key`` from a local cache directory (jax's cache has no delete); whether
    nothing is left there (an empty directory in its place is removed too)."""
    cache = compilation_cache._get_cache(jax_internals.backend(platform))
    path = _entry_path(cache, key) if cache is not None else None
    if path is None:
        return False
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            os.rmdir(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        return True
    except OSError:  # not ours to remove (a read-only directory, a directory with files in it)
        return False
    return True


def persistent_cache_thresholds() -> tuple[float, int]:
    """(seconds of compile time, bytes) below which jax writes no cache entry."""
    return (float(config.persistent_cache_min_compile_time_secs.value),
            int(config.persistent_cache_min_entry_size_bytes.value))


def is_process_zero() -> bool:
    """jax writes cache entries from the first process of a run only."""
    return jax_distributed.global_state.process_id == 0
