"""Where the user's code is, for xmap's error messages."""

from __future__ import annotations

import sys

from pxla_mlir.jaxbridge.jax_internals import source_info_util, summarize_frame

__all__ = ["call_site"]


def call_site(source_info=None) -> str:
    """Where the user's code is, as jax summarizes a location: ``source_info``'s
    user frame, else the innermost user frame of the Python stack (jax's
    tracebacks end at the function being traced, so an equation a map's body
    binds directly, such as an xmap passed as another's function, has none)."""
    if source_info is not None:
        at = source_info_util.summarize(source_info)
        if at:
            return at
    frame = sys._getframe(1)
    while frame is not None and not source_info_util.is_user_filename(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return ""
    return summarize_frame(frame)
