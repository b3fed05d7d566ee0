"""The reducer's progress: one line on stderr, rewritten in place, only on a
terminal (and not with ``PXLA_NO_PROGRESS=1``); lines that stay (``--verbose``)
go above it."""

from __future__ import annotations

import shutil
import sys
from typing import TextIO

from pxla_mlir.mlir.support.terminal import progress_wanted

__all__ = ["Progress"]


class Progress:
    def __init__(self, stream: TextIO | None = None, *, enabled: bool | None = None, verbose: bool = False):
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            enabled = progress_wanted(self.stream)
        self.enabled, self.verbose = enabled, verbose
        self._shown = False

    def show(self, text: str) -> None:
        """Replaces the progress line."""
        if not self.enabled:
            return
        width = shutil.get_terminal_size((100, 20)).columns - 1
        self.stream.write("\r\x1b[K" + text[:width])
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False

    def log(self, text: str) -> None:
        """A line that stays (``--verbose``)."""
        if self.verbose:
            self.clear()
            print(text, file=self.stream, flush=True)
