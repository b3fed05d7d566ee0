"""Where a failing pipeline saves its input, for a ``pxla-opt`` rerun.

``PXLA_REPRO_DIR=DIR`` saves reproducers in DIR and keeps them all. Without
it they go to one cache directory, ``$XDG_CACHE_HOME/pxla_mlir/reproducers``
(``~/.cache/pxla_mlir/reproducers`` by default), which keeps the newest
:data:`KEEP`. The failure message always names the file.

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

``pxla-opt --run-reproducer FILE`` (as ``mlir-opt --run-reproducer``) runs that
pipeline on the module; :func:`split` takes the trailer off for it.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import tempfile

__all__ = ["KEEP", "Recorded", "directory", "save", "split", "trailer"]

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
            f"      verify_each: {flag[recorded.verify_each]}\n"
            "    }\n  }\n#-}\n")


_STRING = rb'"(?:[^"\\]|\\.)*"'
_TRAILER = re.compile(rb"\{-#\s*external_resources:\s*\{\s*mlir_reproducer:\s*"
                      rb"\{(?P<body>(?:%s|[^{}\"])*)\}\s*\}\s*#-\}\s*\Z" % _STRING)
_PIPELINE = re.compile(rb'\bpipeline:\s*"(?P<text>(?:[^"\\]|\\.)*)"')
_BOOL = rb"\b%s:\s*(true|false)\b"


def split(data: bytes) -> tuple[bytes, Recorded | None]:
    """The module text of a reproducer and what its trailer records (None:
    ``data`` ends with no trailer that names a pipeline; it is returned whole)."""
    found = _TRAILER.search(data)
    pipeline = found and _PIPELINE.search(found["body"])
    if found is None or not pipeline:
        return data, None

    def flag(name: bytes, default: bool) -> bool:
        m = re.search(_BOOL % name, found["body"])
        return default if m is None else m.group(1) == b"true"

    text = _unescaped(pipeline["text"].decode("utf-8", "replace"))
    recorded = Recorded(text, verify_each=flag(b"verify_each", True),
                        disable_threading=flag(b"disable_threading", False))
    return data[:found.start()], recorded


def save(text: str, recorded: Recorded | None = None) -> str | None:
    """Writes ``text`` (and the trailer that records ``recorded``) to a new
    reproducer file and returns its path (None if the directory cannot be written)."""
    where, bounded = directory()
    try:
        where.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", suffix=".mlir", prefix=PREFIX, dir=where, delete=False) as f:
            f.write(text)
            if recorded is not None:
                f.write(("" if text.endswith("\n") else "\n") + "\n" + trailer(recorded))
    except OSError:
        return None
    if bounded:
        _prune(where, keep=f.name)
    return f.name


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
