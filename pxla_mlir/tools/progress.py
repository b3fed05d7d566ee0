"""What a long command is doing: a spinner and a line of text on stderr while it works.

Shown only when stderr is a terminal and ``PXLA_NO_PROGRESS`` is unset, so
pipes, files, lit and CI see nothing. A block inside another changes the
text and puts it back when it ends (one spinner at a time)::

    with status("lowering train_step"):
        lowered = fn.lower(*args)
        with status("compiling train_step for 8 devices"):
            compiled = lowered.compile()

jax-free: update-checks uses it too.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from pxla_mlir.mlir.support.terminal import progress_wanted

__all__ = ["enabled", "status"]


class _Shown:
    """The spinner on screen (rich's ``Live``) and its text, or None."""

    live: Any = None
    spinner: Any = None
    text = ""


_shown = _Shown()


def enabled() -> bool:
    return progress_wanted(sys.stderr)


def _show(text: str) -> None:
    _shown.text = text
    _shown.spinner.update(text=text)


@contextlib.contextmanager
def status(text: str) -> Iterator[None]:
    """``text`` beside a spinner on stderr while the block runs (see the module docs)."""
    if not enabled():
        yield
        return
    if _shown.live is not None:
        before = _shown.text
        _show(text)
        try:
            yield
        finally:
            _show(before)
        return
    from rich.console import Console
    from rich.live import Live
    from rich.spinner import Spinner

    _shown.spinner = Spinner("dots", text=text)
    _shown.text = text
    # stdout stays the command's (rich's own Status would send stdout's lines to stderr while it spins);
    # warnings on stderr print above the spinner.
    _shown.live = Live(_shown.spinner, console=Console(stderr=True), transient=True, refresh_per_second=12.5,
                       redirect_stdout=False, redirect_stderr=True)
    _shown.live.start()
    try:
        yield
    finally:
        _shown.live.stop()
        _shown.live = _shown.spinner = None
