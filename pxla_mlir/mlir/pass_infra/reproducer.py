"""Where a failing pipeline saves its input, for a ``pxla-opt`` rerun.

``PXLA_REPRO_DIR=DIR`` saves reproducers in DIR and keeps them all. Without
it they go to one cache directory, ``$XDG_CACHE_HOME/pxla_mlir/reproducers``
(``~/.cache/pxla_mlir/reproducers`` by default), which keeps the newest
:data:`KEEP`. The failure message always names the file.
``pxla-opt --mlir-pass-pipeline-crash-reproducer=FILE`` writes one to FILE.

A reproducer is the module as the pipeline got it, followed by the trailer
MLIR's own crash reproducers end with, naming the pipeline::

    {-#
      external_resources: {
        mlir_reproducer: {
          pipeline: "builtin.module(pxla-pmap-pipeline)",
          disable_threading: false,
          verify_each: true
        }
      }
    #-}

A pipeline that runs passes of plugins records them too, ``pxla_plugins:
"[\\22/abs/my_passes.py\\22]"`` (a JSON list, escaped as MLIR strings are), so
that ``--run-reproducer`` loads them before it parses the pipeline.

A module printed with ``dialect_resources`` gets one block holding both, as
mlir-opt writes its reproducers. ``pxla-opt --run-reproducer FILE`` (as
``mlir-opt --run-reproducer``) runs that pipeline on the module; :func:`split`
takes the trailer off for it, and reads mlir-opt's reproducers too.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import pathlib
import re
import shlex
import tempfile
from typing import IO

from pxla_mlir.mlir.support.files import write_atomically

__all__ = ["KEEP", "Recorded", "directory", "rerun_command", "save", "split", "trailer", "with_trailer", "write"]

KEEP = 20
PREFIX = "pxla_repro_"


def directory() -> tuple[pathlib.Path, bool]:
    """The reproducer directory and whether it is the bounded cache."""
    chosen = os.environ.get("PXLA_REPRO_DIR")
    if chosen:
        return pathlib.Path(chosen).expanduser(), False
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache) / "pxla_mlir" / "reproducers", True


@dataclasses.dataclass(frozen=True)
class Recorded:
    """What a reproducer's trailer says to run."""

    pipeline: str
    verify_each: bool = True
    disable_threading: bool = False
    #: Pass plugins to load first (``--load-pass-plugin``): files as absolute paths, or module names.
    plugins: tuple[str, ...] = ()


def _escaped(text: str) -> str:
    """``text`` as an MLIR string literal's contents: a backslash doubled, a quote or
    unprintable character as a backslash and two hex digits, as MLIR's printer writes them."""
    return "".join(c if c.isprintable() and c not in '"\\' else "\\\\" if c == "\\" else f"\\{ord(c):02X}"
                   for c in text)


def _unescaped(text: str) -> str:
    return re.sub(r"\\([0-9A-Fa-f]{2}|.)",
                  lambda m: chr(int(m.group(1), 16)) if len(m.group(1)) == 2 else m.group(1), text)


def trailer(recorded: Recorded) -> str:
    """The ``{-# external_resources: {mlir_reproducer: ...} #-}`` block that records ``recorded``."""
    flag = {True: "true", False: "false"}
    return ("{-#\n  external_resources: {\n    mlir_reproducer: {\n"
            f'      pipeline: "{_escaped(recorded.pipeline)}",\n'
            f"      disable_threading: {flag[recorded.disable_threading]},\n"
            f"      verify_each: {flag[recorded.verify_each]}"
            + (f',\n      pxla_plugins: "{_escaped(json.dumps(list(recorded.plugins)))}"' if recorded.plugins else "")
            + "\n"
            "    }\n  }\n#-}\n")


_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_KEY = re.compile(rb'\s*([A-Za-z_][\w.$-]*)\s*:\s*')
_WORD = re.compile(rb'[^\s,{}]*')
_COMMA = re.compile(rb"\s*(,?)")
_BLOCK_END = re.compile(rb"#-\}\s*\Z")


@dataclasses.dataclass(frozen=True)
class _Entry:
    """``key: value`` in a ``{-# ... #-}`` block or a dictionary in it; ``start:end`` spans the entry."""

    key: bytes
    value: bytes
    start: int
    end: int


def _value_end(data: bytes, pos: int) -> int:
    """Where the value starting at ``pos`` ends: a ``{...}`` dictionary (strings inside may hold braces), a
    string, or a bare word (true, 3); -1 if the dictionary or string does not close."""
    if data.startswith(b'"', pos):
        m = _STRING.match(data, pos)
        return m.end() if m else -1
    if not data.startswith(b"{", pos):
        word = _WORD.match(data, pos)
        return word.end() if word else pos
    depth = 0
    while pos < len(data):
        if data[pos:pos + 1] == b'"':
            m = _STRING.match(data, pos)
            if m is None:
                return -1
            pos = m.end()
            continue
        depth += {b"{": 1, b"}": -1}.get(data[pos:pos + 1], 0)
        pos += 1
        if depth == 0:
            return pos
    return -1


def _entries(data: bytes, pos: int) -> list[_Entry] | None:
    """The ``key: value`` entries, comma separated, from ``pos`` to the end (None: that is not what is there)."""
    out: list[_Entry] = []
    while True:
        key = _KEY.match(data, pos)
        if key is None:
            return out if not data[pos:].strip() and not out else None
        end = _value_end(data, key.end())
        if end < 0:
            return None
        out.append(_Entry(key[1], data[key.end():end], key.start(1), end))
        comma = _COMMA.match(data, end)
        pos = comma.end() if comma else end
        if not (comma and comma[1]):
            return out if not data[pos:].strip() else None


def _trailing_block(data: bytes) -> tuple[int, int, list[_Entry]] | None:
    """The ``{-# ... #-}`` block ``data`` ends with: where it starts, where its ``#-}`` starts, its entries."""
    end = _BLOCK_END.search(data)
    if end is None:
        return None
    start = data.rfind(b"{-#", 0, end.start())
    while start >= 0:  # the text of an entry could hold '{-#': the block starts at the one its entries parse from
        entries = _entries(data[:end.start()], start + 3)
        if entries is not None:
            return start, end.start(), entries
        start = data.rfind(b"{-#", 0, start)
    return None


def _dictionary(value: bytes) -> dict[bytes, bytes]:
    entries = _entries(value[:-1], 1) if value.startswith(b"{") and value.endswith(b"}") else None
    return {e.key: e.value for e in entries or ()}


def _recorded(external: bytes) -> Recorded | None:
    """What an ``external_resources`` value records (None: no ``mlir_reproducer`` naming a pipeline)."""
    found = _dictionary(_dictionary(external).get(b"mlir_reproducer", b""))
    pipeline = found.get(b"pipeline", b"")
    if not (len(pipeline) >= 2 and pipeline.startswith(b'"') and pipeline.endswith(b'"')):
        return None

    def flag(name: bytes, default: bool) -> bool:
        return {b"true": True, b"false": False}.get(found.get(name, b""), default)

    return Recorded(_unescaped(pipeline[1:-1].decode("utf-8", "replace")),
                    verify_each=flag(b"verify_each", True), disable_threading=flag(b"disable_threading", False),
                    plugins=_plugins(found.get(b"pxla_plugins", b"")))


def _plugins(value: bytes) -> tuple[str, ...]:
    """The plugin list a trailer records (none if it records none, or not as a JSON list of strings)."""
    if not (len(value) >= 2 and value.startswith(b'"') and value.endswith(b'"')):
        return ()
    try:
        found = json.loads(_unescaped(value[1:-1].decode("utf-8", "replace")))
    except ValueError:
        return ()
    if not isinstance(found, list):
        return ()
    return tuple(str(p) for p in found if isinstance(p, str))  # pyright: ignore[reportUnknownVariableType]


def split(data: bytes) -> tuple[bytes, Recorded | None]:
    """The module text of a reproducer and what its trailer records (None:
    ``data`` ends with no trailer that names a pipeline; it is returned whole).

    The trailer is pxla-opt's own block or mlir-opt's, which holds the module's
    ``dialect_resources`` too: those stay with the module, whose line numbers
    do not change."""
    block = _trailing_block(data)
    if block is None:
        return data, None
    start, _, entries = block
    external = [e for e in entries if e.key == b"external_resources"]
    recorded = _recorded(external[-1].value) if external else None
    if recorded is None:
        return data, None
    kept = [data[e.start:e.end] for e in entries if e.key != b"external_resources"]
    module = data[:start] + (b"{-#\n  " + b",\n  ".join(kept) + b"\n#-}\n" if kept else b"")
    return module, recorded


def with_trailer(text: str, recorded: Recorded) -> str:
    """``text`` (a printed module) ending with the block that records ``recorded``: one block, as mlir-opt writes,
    when the module's printout ends with its own ``dialect_resources``."""
    data = text.encode("utf-8")
    block = _trailing_block(data)
    if block is not None and all(e.key != b"external_resources" for e in block[2]) and block[2]:
        entries = trailer(recorded).split("\n", 1)[1].rsplit("#-}", 1)[0]
        return data[:block[1]].decode("utf-8").rstrip() + ",\n" + entries + "#-}\n"
    return text + ("" if text.endswith("\n") else "\n") + "\n" + trailer(recorded)


def write(file: IO[str], text: str, recorded: Recorded) -> None:
    """Writes the module ``text`` and the trailer that records ``recorded`` to
    the open text file ``file``: every reproducer is written here, so that
    ``pxla-opt --run-reproducer`` replays each one."""
    file.write(with_trailer(text, recorded))


def save(text: str, recorded: Recorded) -> str | None:
    """Writes a reproducer (see :func:`write`) to a new file of the reproducer
    directory and returns its path (None if the directory cannot be written)."""
    where, bounded = directory()
    written = io.StringIO()
    write(written, text, recorded)
    try:
        where.mkdir(parents=True, exist_ok=True)
        fd, path = tempfile.mkstemp(suffix=".mlir", prefix=PREFIX, dir=where)  # a name of its own
        os.close(fd)
        write_atomically(path, written.getvalue())  # a reproducer is replayed whole or not found
    except OSError:
        return None
    if bounded:
        _prune(where, keep=path)
    return path


def rerun_command(path: str) -> str:
    """The command that replays the reproducer at ``path``."""
    return f"pxla-opt --run-reproducer {shlex.quote(path)}"


def _prune(where: pathlib.Path, keep: str) -> None:
    def age(p: pathlib.Path) -> float:
        try:
            return p.stat().st_mtime
        except OSError:  # removed by another process meanwhile
            return 0.0

    old = sorted(where.glob(f"{PREFIX}*.mlir"), key=age, reverse=True)[KEEP:]
    for path in old:
        if str(path) != keep:
            path.unlink(missing_ok=True)
