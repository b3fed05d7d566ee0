"""pxla_mlir's entries in jax's persistent compilation cache, checked before use.

jax loads whatever bytes a cache file holds under a key and runs them: a file
holding another program with the same signature computes that program's
numbers, and a damaged payload (inside valid compression) or an executable
compiled for other shapes crashes the process. Our entries therefore say
what they are before the executable (under a key of their own, so jax.jit
never reads them: ``pxla-`` and jax's key of the options, devices, versions
and flags, with the digest of the module's text in place of jax's hash of
the module, so a key is made without the module):

    MAGIC | sha256(sha256(module text) + device ids) | sha256(executable) | compile seconds | zlib(executable)

A load checks both digests against the module and devices asked for, then the
deserialized executable's per-device parameter and result shapes against the
ones the caller expects; on any doubt the entry is removed, the module
compiled anew (and stored again), and a :class:`CacheEntryRejected` warning
says why.
"""

from __future__ import annotations

import hashlib
import struct
import time
import warnings
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from jax import monitoring

from pxla_mlir.jaxbridge import cache_access, executables, jax_internals

if TYPE_CHECKING:
    from pxla_mlir.runtime.module_facts import ModuleFacts

__all__ = ["load_or_compile", "CacheEntryRejected", "MAGIC", "KEY_PREFIX", "entry_key"]

MAGIC = b"pxla-mlir cache entry v2\n"
KEY_PREFIX = "pxla-"
_HEADER = struct.Struct(f"{len(MAGIC)}s32s32sI")

#: (parameters, results): per-device (shape, dtype) the executable must have; None entries are not checked.
Expected = tuple[Sequence, Sequence]


class CacheEntryRejected(UserWarning):
    """A persistent cache entry did not hold the program asked for; it was compiled anew."""


def entry_key(facts: ModuleFacts, devices: Sequence, ids: np.ndarray, options, platform: str | None) -> str:
    return KEY_PREFIX + cache_access.cache_key(facts.name or "module", facts.digest, devices, ids, options, platform)


def _program_digest(facts: ModuleFacts, ids: np.ndarray) -> bytes:
    h = hashlib.sha256(facts.digest)
    h.update(np.asarray(ids, np.int64).tobytes())
    return h.digest()


def load_or_compile(facts: ModuleFacts, devices: Sequence, ids: np.ndarray, options, platform: str | None,
                    compile: Callable[[], object], expected: Expected | None = None):
    """The executable of the module ``facts`` tell of from the cache when its
    entry checks out, else from ``compile()`` (then stored)."""
    key = entry_key(facts, devices, ids, options, platform)
    digest = _program_digest(facts, ids)
    monitoring.record_event("/jax/compilation_cache/compile_requests_use_cache")
    raw = cache_access.cache_read(key, platform)
    if raw is not None:
        executable, doubt = _load(raw, digest, devices, options, platform, expected)
        if executable is not None:
            monitoring.record_event("/jax/compilation_cache/cache_hits")
            return executable
        cache_access.cache_remove(key, platform)
        warnings.warn(CacheEntryRejected(f"pxla_mlir: the compilation cache entry {key[:40]}... was not used: "
                                         f"{doubt}; it was removed and the program compiled anew"), stacklevel=4)
    jax_internals.util.test_event("compile_after_persistent_compilation_miss")  # as jax's compiler on a miss
    start = time.monotonic()
    executable = compile()
    seconds = time.monotonic() - start
    _store(key, digest, executable, seconds, platform)
    return executable


def _load(raw: bytes, digest: bytes, devices, options, platform, expected):
    """(executable, None), or (None, why it was not used)."""
    if len(raw) < _HEADER.size or not raw.startswith(MAGIC):
        return None, "it is not a pxla_mlir entry of this version"
    _, program, payload_digest, _ = _HEADER.unpack_from(raw)
    if program != digest:
        return None, "it was compiled from another module or for other devices"
    try:
        payload = zlib.decompress(raw[_HEADER.size:])
    except zlib.error as e:
        return None, f"its payload does not decompress ({e})"
    if hashlib.sha256(payload).digest() != payload_digest:
        return None, "its executable is damaged (checksum mismatch)"
    try:
        executable = executables.deserialize_executable(payload, devices, options)
    except Exception as e:  # jaxlib's runtime error: not a loadable executable
        return None, f"its executable does not load ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
    if expected is not None:
        mismatch = _shape_mismatch(executable, expected)
        if mismatch:
            return None, mismatch
    return executable, None


def _shape_mismatch(executable, expected: Expected) -> str:
    params, results = program_shapes(executable)
    want_params, want_results = expected
    if len(params) != len(want_params) or len(results) != len(want_results):
        return (f"its executable takes {len(params)} parameters and gives {len(results)} results, the program "
                f"{len(want_params)} and {len(want_results)}")
    for what, got, want in (("parameter", params, want_params), ("result", results, want_results)):
        for i, (g, w) in enumerate(zip(got, want)):
            if w is not None and g != w:
                return f"its {what} {i} is {g} per device, the program's {w}"
    return ""


def program_shapes(executable) -> tuple[list, list]:
    """The per-device (shape, dtype) of an executable's parameters and results, as XLA compiled them."""
    module = executable.hlo_modules()[0]
    shape = jax_internals.xc.XlaComputation(module.as_serialized_hlo_module_proto()).program_shape()

    def leaves(s):
        if s.is_tuple():
            return [x for t in s.tuple_shapes() for x in leaves(t)]
        return [None] if s.is_token() else [(tuple(s.dimensions()), np.dtype(s.numpy_dtype()))]

    return [x for p in shape.parameter_shapes() for x in leaves(p)], leaves(shape.result_shape())


def _store(key: str, digest: bytes, executable, seconds: float, platform) -> None:
    min_seconds, min_bytes = cache_access.persistent_cache_thresholds()
    if seconds < min_seconds or not cache_access.is_process_zero():  # as jax: the first process writes
        return
    payload = executables.serialize_executable(executable)
    entry = _HEADER.pack(MAGIC, digest, hashlib.sha256(payload).digest(), min(int(seconds), 2**32 - 1)) + \
        zlib.compress(payload)
    if len(entry) >= min_bytes:
        monitoring.record_event("/jax/compilation_cache/cache_misses")  # jax's name for an entry written
        cache_access.cache_write(key, entry, platform)
