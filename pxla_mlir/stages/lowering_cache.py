"""Lowerings kept by what decides them: a map whose inputs value
(:class:`~pxla_mlir.stages.map_lowering.LoweringInputs`: the traced jaxpr,
options, devices, pipeline) is equal to an earlier one's skips jax's
lowering, the import and the pass pipeline, and parses the modules that
earlier lowering produced.

The key (:func:`key`) is a digest of the inputs value, every field of it
(:mod:`pxla_mlir.jaxbridge.jaxpr_fingerprint`; None when a value in them
cannot be encoded losslessly, and then nothing is cached), jax's trace
context, the version of every pass of the user's own its pipeline runs, as
registered now (``NamedPipeline.versions``), and the versions of pxla_mlir
(with a digest of its code, which stands for its own passes' versions), jax
and jaxlib. A
lowering is kept only when its module alone is the program: none holding
host callbacks or a jax keepalive.

An entry also holds what compiling reads of the final module
(:class:`~pxla_mlir.runtime.module_facts.ModuleFacts`: its name, the digest
of its text, device counts, form): a warm start whose executable is in the
persistent cache then parses no module of the program (jax's MLIR context,
with its dialects, is never made); the modules are parsed when something
asks for them (``as_text``, a compile that misses).

Two levels: in memory (the latest 64) for re-lowering in one process, and, when
jax's persistent compilation cache is on, in its directory beside the
executables, sealed as every entry of ours is (:mod:`pxla_mlir.runtime.cache_entry`,
kind :data:`LOWERINGS`), so that a warm start skips lowering as well as
compiling. Set ``PXLA_MLIR_LOWERING_CACHE=0`` to lower every time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import struct
from typing import Any

import jax

from pxla_mlir.jaxbridge import cache_access, jax_internals, jaxpr_fingerprint
from pxla_mlir.mlir.support.lru import LRU
from pxla_mlir.mlir.support.stats import STATS
from pxla_mlir.runtime import cache_entry
from pxla_mlir.runtime.cache_entry import EntryKind
from pxla_mlir.runtime.compile import CacheDirError, apply_cache_env
from pxla_mlir.runtime.module_facts import ModuleFacts
from pxla_mlir.version import source_digest

__all__ = ["ENV", "LOWERINGS", "Entry", "clear", "enabled", "key", "lookup", "store"]

ENV = "PXLA_MLIR_LOWERING_CACHE"
#: Lowerings: no header of their own.
LOWERINGS = EntryKind("pxla-lowering-", b"pxla-mlir lowering v6\n", struct.Struct("<"), "lowering cache entry",
                      "the map lowered anew", "it holds the lowering of another program")
#: In memory: the latest lowerings (lru.clear_all() empties it, as every other cache of ours), each at most
#: _MEMORY_BYTES of text (a bigger one is read from disk again, or lowered).
_memory = LRU(64)
_MEMORY_BYTES = 16 << 20


@dataclasses.dataclass(frozen=True)
class Entry:
    """A lowering's final module as text, with locations, and what compiling
    reads of it (its :class:`~pxla_mlir.runtime.module_facts.ModuleFacts`),
    so that a warm start whose executable is cached parses nothing. (Not
    MLIR bytecode, which writes ten times faster: jaxlib's does not read
    every location back as it was, and a lowering from the cache prints as
    the one it keeps.) The pxla form is not kept: printing it would cost a
    cold start more than the whole lookup saves a warm one, and the few who
    ask a cached lowering for it get it imported again from the inputs."""

    final: str
    facts: ModuleFacts
    hints: Any = None  # what the map read from its pxla form for its layout (plain data: JSON)

    def size(self) -> int:
        return len(self.final)


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def key(inputs: Any) -> bytes | None:
    """The digest of what decides a lowering (see the module docstring), or None if it cannot be told."""
    if not enabled():
        return None
    return jaxpr_fingerprint.digest(inputs, inputs.pipeline.versions(), _versions())


def lookup(digest: bytes, platform: str | None) -> Entry | None:
    entry = _memory.get(digest)
    if entry is not None:
        STATS["lowering_cache_hits"] += 1
        return entry
    # PXLA_MLIR_CACHE_DIR turns the persistent cache on before the first compile would; a bad directory is
    # the compile's error to report, as it has always been, and lowering goes on.
    with contextlib.suppress(CacheDirError):
        apply_cache_env()
    if not cache_access.persistent_cache_used(platform):
        return None
    sealed = cache_entry.read(LOWERINGS, digest.hex(), digest, platform=platform, stacklevel=3)
    if sealed is None:
        return None
    entry = _decode(sealed.payload)
    if isinstance(entry, str):
        cache_entry.reject(LOWERINGS, digest.hex(), entry, platform=platform, stacklevel=3)
        return None
    _remember(digest, entry)
    STATS["lowering_cache_hits"] += 1
    STATS["lowering_cache_loads"] += 1
    return entry


def store(digest: bytes, entry: Entry, platform: str | None) -> None:
    _remember(digest, entry)
    if cache_access.persistent_cache_used(platform):
        cache_entry.write(LOWERINGS, digest.hex(), digest, _payload(entry), platform=platform)


def clear() -> None:
    """Forgets the in-memory lowerings (the persistent ones stay)."""
    _memory.clear()


def _remember(digest: bytes, entry: Entry) -> None:
    if entry.size() <= _MEMORY_BYTES:
        _memory[digest] = entry


_LENGTHS = struct.Struct("<Q")


def _payload(entry: Entry) -> bytes:
    facts = json.dumps({"facts": entry.facts.to_json(), "hints": entry.hints}).encode()
    return _LENGTHS.pack(len(facts)) + facts + entry.final.encode()


def _decode(payload: bytes) -> Entry | str:
    """The entry of a sealed payload, or why it does not read."""
    try:
        (n_facts,) = _LENGTHS.unpack_from(payload)
        start = _LENGTHS.size
        facts, final = payload[start:start + n_facts], payload[start + n_facts:]
        data = json.loads(facts)
        return Entry(final.decode(), ModuleFacts.from_json(data["facts"]), data["hints"])
    except (struct.error, UnicodeDecodeError, ValueError, KeyError, TypeError, IndexError) as e:
        return f"its payload does not read ({e})"


@functools.cache
def _versions() -> tuple:
    """pxla_mlir's version and a digest of its code (:func:`pxla_mlir.version.source_digest`), jax's and
    jaxlib's versions."""
    import jaxlib.version

    return ("pxla_mlir", source_digest()[0], "jax", jax.__version__, "jaxlib", jaxlib.version.__version__,
            jax_internals.jaxlib_extension_version)
