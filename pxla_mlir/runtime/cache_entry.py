"""pxla_mlir's entries in jax's persistent cache directory, sealed and checked.

An entry is untrusted bytes: jax would run whatever an executable's file
holds, and a lowering's file becomes a program. So each of our entries says
what it is before its payload, in one format for every kind
(:class:`EntryKind`: executables, lowerings):

    MAGIC | sha256(identity) | sha256(zlib(payload)) | header | zlib(payload)

``identity`` is what the entry must be the entry of (the program's digest
and devices, a lowering's key), ``header`` a few fixed bytes of the kind's
own. An entry that is not there reads as None; one that is there but is not
a sealed entry of this kind and identity, or that cannot be read at all
(a directory, a FIFO, no permission), is removed where it can be, a
:class:`CacheEntryRejected` warning says why, and the caller computes
anew. Entries are written whole or not at all (``cache_access.cache_write``)
by the first process of a run. Each kind's file names have a prefix of
their own, none a prefix of another's, so a listing tells them apart.

The checksum is of the bytes stored, not of the payload: a damaged entry is
refused before zlib sees it, and a warm start hashes the compressed bytes
(a fifth of the payload's) instead of the whole executable.
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct
import warnings
import zlib

from pxla_mlir.jaxbridge import cache_access
from pxla_mlir.mlir.support.stats import timed

__all__ = ["CacheEntryRejected", "EntryKind", "Unsealed", "read", "write", "reject"]


class CacheEntryRejected(UserWarning):
    """A persistent cache entry did not hold what was asked for; it was computed anew."""


@dataclasses.dataclass(frozen=True)
class EntryKind:
    """One kind of entry: its file-name prefix, its magic (format and version), the fixed header its
    payload carries, and how a warning names it and what is done instead."""

    prefix: str  # "pxla-exe-": no prefix of another kind's
    magic: bytes
    header: struct.Struct  # the kind's own fixed fields after the two digests
    what: str  # "compilation cache entry"
    instead: str  # "the program compiled anew"
    other: str = "it holds another program's entry"  # why an entry of another identity is refused

    def seal_struct(self) -> struct.Struct:
        return struct.Struct(f"{len(self.magic)}s32s32s{self.header.format.lstrip('<>=!@')}")


@dataclasses.dataclass(frozen=True)
class Unsealed:
    """A checked entry: its payload and the kind's header fields."""

    payload: bytes
    header: tuple


def write(kind: EntryKind, name: str, identity: bytes, payload: bytes, header: tuple = (), *,
          platform: str | None = None, level: int = 1, min_size: int = 0) -> bool:
    """Seals ``payload`` and stores it under ``kind.prefix + name``, from the first process of a run and when
    the sealed entry has at least ``min_size`` bytes (jax's threshold); whether it was stored."""
    if not cache_access.is_process_zero():
        return False
    stored = zlib.compress(payload, level)
    sealed = kind.seal_struct().pack(kind.magic, hashlib.sha256(identity).digest(),
                                     hashlib.sha256(stored).digest(), *header) + stored
    if len(sealed) < min_size:
        return False
    cache_access.cache_write(kind.prefix + name, sealed, platform)
    return True


def read(kind: EntryKind, name: str, identity: bytes, *, platform: str | None = None,
         stacklevel: int = 2) -> Unsealed | None:
    """The entry stored under ``kind.prefix + name``, checked: None if there is none, or (rejected: removed
    and warned about) if it is not a sound entry of this kind for ``identity``."""
    key = kind.prefix + name
    try:
        with timed("cache read"):
            raw = cache_access.cache_read(key, platform)
    except cache_access.UnreadableEntry as e:
        reject(kind, name, str(e), platform=platform, stacklevel=stacklevel + 1)
        return None
    if raw is None:
        return None
    with timed("cache unseal"):  # decompress, and the two checksums
        entry = _unseal(kind, raw, identity)
    if isinstance(entry, str):
        reject(kind, name, entry, platform=platform, stacklevel=stacklevel + 1)
        return None
    return entry


def reject(kind: EntryKind, name: str, why: str, *, platform: str | None = None, stacklevel: int = 2) -> None:
    """Removes an entry that is not what it should be and says so (a :class:`CacheEntryRejected` warning)."""
    key = kind.prefix + name
    removed = cache_access.cache_remove(key, platform)
    fate = "it was removed" if removed else "it could not be removed (remove it by hand)"
    warnings.warn(CacheEntryRejected(f"pxla_mlir: the {kind.what} {key[:40]}... was not used: {why}; {fate} and "
                                     f"{kind.instead}"), stacklevel=stacklevel + 1)


def _unseal(kind: EntryKind, raw: bytes, identity: bytes) -> Unsealed | str:
    """The entry's payload, or why it is not a sound entry."""
    layout = kind.seal_struct()
    if len(raw) < layout.size or not raw.startswith(kind.magic):
        return f"it is not a pxla_mlir {kind.what} of this version"
    _, identity_digest, stored_digest, *header = layout.unpack_from(raw)
    if identity_digest != hashlib.sha256(identity).digest():
        return kind.other
    stored = memoryview(raw)[layout.size:]  # not copied
    if hashlib.sha256(stored).digest() != stored_digest:
        return "its payload is damaged (checksum mismatch)"
    try:
        payload = zlib.decompress(stored)
    except zlib.error as e:  # the checksum holds: it was written so
        return f"its payload does not decompress ({e})"
    return Unsealed(payload, tuple(header))
