"""Whether a command may show its progress: on a terminal only, so that pipes, files, lit and CI see nothing,
and not with ``PXLA_NO_PROGRESS`` set."""

from __future__ import annotations

import os
import sys
from typing import TextIO

__all__ = ["progress_wanted"]


def progress_wanted(stream: TextIO | None = None) -> bool:
    """Whether progress may be shown on ``stream`` (stderr by default)."""
    target = stream if stream is not None else sys.stderr
    try:
        return target is not None and target.isatty() and not os.environ.get("PXLA_NO_PROGRESS")
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
