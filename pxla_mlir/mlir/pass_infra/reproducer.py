"""Where a failing pipeline saves its input, for a ``pxla-opt`` rerun.

``PXLA_REPRO_DIR=DIR`` saves reproducers in DIR and keeps them all. Without
it they go to one cache directory, ``$XDG_CACHE_HOME/pxla_mlir/reproducers``
(``~/.cache/pxla_mlir/reproducers`` by default), which keeps the newest
:data:`KEEP`. The failure message always names the file.
"""

from __future__ import annotations

import os
import pathlib
import tempfile

__all__ = ["KEEP", "directory", "save"]

KEEP = 20
PREFIX = "pxla_repro_"


def directory() -> tuple[pathlib.Path, bool]:
    """The reproducer directory and whether it is the bounded cache."""
    chosen = os.environ.get("PXLA_REPRO_DIR")
    if chosen:
        return pathlib.Path(chosen).expanduser(), False
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(cache) / "pxla_mlir" / "reproducers", True


def save(text: str) -> str | None:
    """Writes ``text`` to a new reproducer file and returns its path (None if
    the directory cannot be written)."""
    where, bounded = directory()
    try:
        where.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", suffix=".mlir", prefix=PREFIX, dir=where, delete=False) as f:
            f.write(text)
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
