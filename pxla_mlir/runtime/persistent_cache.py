"""pxla_mlir's executables in jax's persistent compilation cache, checked before use.

jax loads whatever bytes a cache file holds under a key and runs them: a file
holding another program with the same signature computes that program's
numbers, and a damaged payload (inside valid compression) or an executable
compiled for other shapes crashes the process. Our entries are therefore
sealed (:mod:`.cache_entry`, kind :data:`EXECUTABLES`), under a key of
their own, so jax.jit never reads them: ``pxla-exe-`` and jax's key of the
options, devices, versions and flags, with the digest of the module's text
in place of jax's hash of the module, so a key is made without the module.
The identity an entry is checked against is the module's digest and the
device ids; its payload is the per-device parameter and result shapes the
executable was compiled for (read from it once, when it is stored) and the
serialized executable. A load checks the seal, then those shapes against the
ones the caller expects, then deserializes; on any doubt the entry is
removed, the module compiled anew (and stored again), and a
:class:`CacheEntryRejected` warning says why.
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from jax import monitoring

from pxla_mlir.jaxbridge import cache_access, executables, jax_internals
from pxla_mlir.mlir.support.stats import timed
from pxla_mlir.runtime import cache_entry
from pxla_mlir.runtime.cache_entry import CacheEntryRejected, EntryKind

if TYPE_CHECKING:
    from pxla_mlir.runtime.module_facts import ModuleFacts

__all__ = ["load_or_compile", "CacheEntryRejected", "EXECUTABLES", "entry_key", "program_shapes"]

#: Executables: the header holds the seconds the compile took (jax's threshold for writing is on them).
EXECUTABLES = EntryKind("pxla-exe-", b"pxla-mlir executable v4\n", struct.Struct("<I"), "compilation cache entry",
                        "the program compiled anew", "it was compiled from another module or for other devices")

#: (parameters, results): per-device (shape, dtype) the executable must have; None entries are not checked.
Expected = tuple[Sequence, Sequence]
_LENGTH = struct.Struct("<Q")


def entry_key(facts: ModuleFacts, devices: Sequence, ids: np.ndarray, options, platform: str | None) -> str:
    """The file name of the entry (without the kind's prefix)."""
    return cache_access.cache_key(facts.name or "module", facts.digest, devices, ids, options, platform)


def _identity(facts: ModuleFacts, ids: np.ndarray) -> bytes:
    return facts.digest + np.asarray(ids, np.int64).tobytes()


def load_or_compile(facts: ModuleFacts, devices: Sequence, ids: np.ndarray, options, platform: str | None,
                    compile: Callable[[], object], expected: Expected | None = None):
    """The executable of the module ``facts`` tell of from the cache when its
    entry checks out, else from ``compile()`` (then stored)."""
    name = entry_key(facts, devices, ids, options, platform)
    identity = _identity(facts, ids)
    monitoring.record_event("/jax/compilation_cache/compile_requests_use_cache")
    entry = cache_entry.read(EXECUTABLES, name, identity, platform=platform, stacklevel=3)
    if entry is not None:
        executable, doubt = _load(entry.payload, devices, options, expected)
        if executable is not None:
            monitoring.record_event("/jax/compilation_cache/cache_hits")
            return executable
        cache_entry.reject(EXECUTABLES, name, doubt, platform=platform, stacklevel=3)
    jax_internals.util.test_event("compile_after_persistent_compilation_miss")  # as jax's compiler on a miss
    start = time.monotonic()
    executable = compile()
    _store(name, identity, executable, time.monotonic() - start, platform)
    return executable


def _load(payload: bytes, devices, options, expected: Expected | None):
    """(executable, "") from a sealed entry's payload, or (None, why it was not used)."""
    try:
        (n,) = _LENGTH.unpack_from(payload)
        shapes = json.loads(payload[_LENGTH.size:_LENGTH.size + n])
        params, results = ([None if s is None else (tuple(s[0]), np.dtype(s[1])) for s in side] for side in shapes)
    except (struct.error, ValueError, TypeError, IndexError) as e:
        return None, f"its payload does not read ({e})"
    if expected is not None:
        mismatch = _shape_mismatch((params, results), expected)
        if mismatch:
            return None, mismatch
    try:
        with timed("deserialize"):
            return executables.deserialize_executable(payload[_LENGTH.size + n:], devices, options), ""
    except Exception as e:  # jaxlib's runtime error: not a loadable executable
        return None, f"its executable does not load ({str(e).splitlines()[0] if str(e) else type(e).__name__})"


def _shape_mismatch(shapes: tuple[list, list], expected: Expected) -> str:
    params, results = shapes
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
    """The per-device (shape, dtype) of an executable's parameters and results, as XLA compiled them
    (None for a token)."""
    module = executable.hlo_modules()[0]
    shape = jax_internals.xc.XlaComputation(module.as_serialized_hlo_module_proto()).program_shape()

    def leaves(s):
        if s.is_tuple():
            return [x for t in s.tuple_shapes() for x in leaves(t)]
        return [None] if s.is_token() else [(tuple(s.dimensions()), np.dtype(s.numpy_dtype()))]

    return [x for p in shape.parameter_shapes() for x in leaves(p)], leaves(shape.result_shape())


def _store(name: str, identity: bytes, executable, seconds: float, platform) -> None:
    min_seconds, min_bytes = cache_access.persistent_cache_thresholds()
    if seconds < min_seconds or not cache_access.is_process_zero():  # as jax: the first process writes
        return
    # The shapes are read from the executable once, here: a load checks them without reading its HLO.
    shapes = json.dumps([[None if s is None else [list(s[0]), s[1].name] for s in side]
                         for side in program_shapes(executable)]).encode()
    payload = _LENGTH.pack(len(shapes)) + shapes + executables.serialize_executable(executable)
    if cache_entry.write(EXECUTABLES, name, identity, payload, (min(int(seconds), 2**32 - 1),), platform=platform,
                         level=6, min_size=min_bytes):
        monitoring.record_event("/jax/compilation_cache/cache_misses")  # jax's name for an entry written
