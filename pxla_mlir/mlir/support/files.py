"""Files written whole or not at all.

Every file a command of this package writes (``pxla-opt -o``, ``emit -o``,
reproducers, explore pages, golden files, ``update-checks``) is written to a
temporary file beside its target and renamed over it once complete, as
mlir-opt's output files are kept: a run that fails (a parse error, a pass
that fails, an interrupt) leaves the target as it was, so ``-o`` may name the
input itself, and a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile

__all__ = ["write_atomically"]


def write_atomically(path: str | os.PathLike[str], data: str | bytes, *, encoding: str = "utf-8") -> None:
    """Writes ``data`` to ``path`` whole: to a temporary file in the same folder, then renamed over ``path``
    (keeping an existing file's permissions; through a symbolic link, its target's, so the link stays a link).
    Raises ``OSError`` as ``open`` would, leaving ``path`` as it was."""
    path = os.path.realpath(os.fspath(path))
    folder = os.path.dirname(os.path.abspath(path))
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = None  # a new file: the umask's permissions, as open() would give it
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode(encoding) if isinstance(data, str) else data)
        os.chmod(tmp, mode if mode is not None else _default_mode())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _default_mode() -> int:
    return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask, read without setting it where the system tells it (setting it races threads)."""
    with contextlib.suppress(OSError, ValueError, StopIteration), open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("Umask:")).split()[1], 8)
    umask = os.umask(0o022)
    os.umask(umask)
    return umask
