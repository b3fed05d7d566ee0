"""Lowerings kept by what decides them: a map traced to an equal jaxpr, with
equal options, devices and versions, skips jax's lowering, the import and
the pass pipeline, and parses the modules an earlier lowering produced.

The key (:func:`key`) is a digest of the traced jaxpr and the map's params
(:mod:`pxla_mlir.jaxbridge.jaxpr_fingerprint`; None when a value in them
cannot be encoded losslessly, and then nothing is cached), jax's trace
context, the pipeline text with the version of every plugin pass in it, and
the versions of pxla_mlir (with a digest of its installed files), jax and
jaxlib. A lowering is kept only when its module alone is the program: none
holding host callbacks or a jax keepalive.

An entry also holds what compiling reads of the final module
(:class:`~pxla_mlir.runtime.module_facts.ModuleFacts`: its name, the digest
of its text, device counts, form): a warm start whose executable is in the
persistent cache then parses no module of the program (jax's MLIR context,
with its dialects, is never made); the modules are parsed when something
asks for them (``as_text``, a compile that misses).

Two levels: in memory (the latest 64) for re-lowering in one process, and, when
jax's persistent compilation cache is on, in its directory beside the
executables, so that a warm start skips lowering as well as compiling.
A persistent entry says what it is before its payload:

    MAGIC | sha256(key) | sha256(payload) | zlib(payload)

and one that does not check out is removed, warned about
(:class:`~pxla_mlir.runtime.persistent_cache.CacheEntryRejected`) and lowered
anew. Entries are written whole or not at all (``cache_access.cache_write``).
Set ``PXLA_MLIR_LOWERING_CACHE=0`` to lower every time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import struct
import warnings
import zlib
from typing import Any

import jax

from pxla_mlir.jaxbridge import cache_access, jax_internals, jaxpr_fingerprint
from pxla_mlir.mlir.support.lru import LRU
from pxla_mlir.mlir.support.stats import STATS
from pxla_mlir.runtime.compile import CacheDirError, apply_cache_env
from pxla_mlir.runtime.module_facts import ModuleFacts
from pxla_mlir.runtime.persistent_cache import CacheEntryRejected

__all__ = ["Entry", "key", "lookup", "store", "enabled", "clear", "ENV", "KEY_PREFIX"]

ENV = "PXLA_MLIR_LOWERING_CACHE"
MAGIC = b"pxla-mlir lowering v2\n"
KEY_PREFIX = "pxla-lowering-"
_HEADER = struct.Struct(f"{len(MAGIC)}s32s32s")
#: In memory: the latest lowerings (lru.clear_all() empties it, as every other cache of ours), each at most
#: _MEMORY_BYTES of text (a bigger one is read from disk again, or lowered).
_memory = LRU(64)
_MEMORY_BYTES = 16 << 20


@dataclasses.dataclass(frozen=True)
class Entry:
    """A lowering's modules as text, with locations: the pxla form and the
    final module, and what compiling reads of the final module (its
    :class:`~pxla_mlir.runtime.module_facts.ModuleFacts`), so that a warm start
    whose executable is cached parses neither."""

    pxla: str
    final: str
    facts: ModuleFacts
    hints: Any = None  # what the map read from its pxla form for its layout (plain data: JSON)

    def size(self) -> int:
        return len(self.pxla) + len(self.final)


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def key(*values) -> bytes | None:
    """The digest of what decides a lowering (see the module docstring), or None if it cannot be told."""
    if not enabled():
        return None
    return jaxpr_fingerprint.digest(*values, _versions())


def plugin_versions(pipeline: str) -> tuple:
    """(argument, module, version) of every pass registered at run time that ``pipeline`` names: built-in
    passes are covered by the package's own digest."""
    from pxla_mlir.mlir.pass_infra import registry

    return tuple((name, cls.__module__, str(getattr(cls, "version", ""))) for name, cls in
                 sorted(registry.REGISTERED.items()) if name in pipeline)


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
    raw = cache_access.cache_read(_file_key(digest), platform)
    if raw is None:
        return None
    entry, doubt = _decode(raw, digest)
    if entry is None:
        cache_access.cache_remove(_file_key(digest), platform)
        warnings.warn(CacheEntryRejected(f"pxla_mlir: the lowering cache entry {_file_key(digest)[:40]}... was not "
                                         f"used: {doubt}; it was removed and the map lowered anew"), stacklevel=3)
        return None
    _remember(digest, entry)
    STATS["lowering_cache_hits"] += 1
    STATS["lowering_cache_loads"] += 1
    return entry


def store(digest: bytes, entry: Entry, platform: str | None) -> None:
    _remember(digest, entry)
    if cache_access.persistent_cache_used(platform) and cache_access.is_process_zero():
        payload = _payload(entry)
        cache_access.cache_write(_file_key(digest), _HEADER.pack(MAGIC, hashlib.sha256(digest).digest(),
                                                                 hashlib.sha256(payload).digest()) +
                                 zlib.compress(payload, 1), platform)


def clear() -> None:
    """Forgets the in-memory lowerings (the persistent ones stay)."""
    _memory.clear()


def _remember(digest: bytes, entry: Entry) -> None:
    if entry.size() <= _MEMORY_BYTES:
        _memory[digest] = entry


def _file_key(digest: bytes) -> str:
    return KEY_PREFIX + digest.hex()


_LENGTHS = struct.Struct("<QQ")


def _payload(entry: Entry) -> bytes:
    pxla = entry.pxla.encode()
    facts = json.dumps({"facts": entry.facts.to_json(), "hints": entry.hints}).encode()
    return _LENGTHS.pack(len(pxla), len(facts)) + pxla + facts + entry.final.encode()


def _decode(raw: bytes, digest: bytes) -> tuple[Entry | None, str]:
    if len(raw) < _HEADER.size or not raw.startswith(MAGIC):
        return None, "it is not a pxla_mlir lowering entry of this version"
    _, key_digest, payload_digest = _HEADER.unpack_from(raw)
    if key_digest != hashlib.sha256(digest).digest():
        return None, "it holds the lowering of another program"
    try:
        payload = zlib.decompress(raw[_HEADER.size:])
    except zlib.error as e:
        return None, f"its payload does not decompress ({e})"
    if hashlib.sha256(payload).digest() != payload_digest:
        return None, "its payload is damaged (checksum mismatch)"
    try:
        n_pxla, n_facts = _LENGTHS.unpack_from(payload)
        start = _LENGTHS.size
        pxla, facts = payload[start:start + n_pxla], payload[start + n_pxla:start + n_pxla + n_facts]
        final = payload[start + n_pxla + n_facts:]
        data = json.loads(facts)
        return Entry(pxla.decode(), final.decode(), ModuleFacts.from_json(data["facts"]), data["hints"]), ""
    except (struct.error, UnicodeDecodeError, ValueError, KeyError, TypeError, IndexError) as e:
        return None, f"its payload does not read ({e})"


@functools.cache
def _versions() -> tuple:
    """pxla_mlir's version and a digest of its installed files (a changed pass or importer is another
    lowering, whatever the version says), jax's and jaxlib's versions."""
    import jaxlib.version

    return ("pxla_mlir", _package_digest(), "jax", jax.__version__, "jaxlib", jaxlib.version.__version__,
            jax_internals.jaxlib_extension_version)


def _package_digest() -> str:
    import importlib.util

    import pxla_mlir

    passes = importlib.util.find_spec("pxla_mlir.passes")  # the top-level passes/ folder in a checkout
    roots = {os.path.dirname(pxla_mlir.__file__)} | ({os.path.dirname(passes.origin)} if passes and passes.origin
                                                     else set())
    h = hashlib.sha256(pxla_mlir.__version__.encode())
    for root in sorted(roots):
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            where = folder[len(root):]
            for name in sorted(files):
                if name.endswith(".py"):
                    st = os.stat(os.path.join(folder, name))
                    h.update(f"{where}/{name}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()
