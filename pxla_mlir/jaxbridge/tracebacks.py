"""Tracebacks that end at the user's line: jax's filtering of its own frames, applied to ours.

The package's folders are registered with jax's traceback filtering, so
whatever jax leaves out of a traceback (in the mode ``jax_traceback_filtering``
or ``JAX_TRACEBACK_FILTERING`` says) it leaves out of ours too, under a jax
boundary (``jax.jit`` of a function calling a map) as under ours.

Our entry points (:data:`pxla_mlir.errors.ENTRY_POINTS`: a map's call,
``lower``, ``compile``, a ``Compiled``'s call) are boundaries as jax's
``api_boundary`` functions are: :func:`filter_frames` in their ``except``
clause, then a bare ``raise`` (which adds no frame), leaves the traceback
jax would. The outermost boundary on the stack, ours or jax's, filters; the
ones below it leave the exception alone. A map's cached call keeps its one
frame: :func:`filter_frames` runs only once an exception is raised.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar, cast

from pxla_mlir.errors import ENTRY_POINTS
from pxla_mlir.jaxbridge.jax_internals import traceback_util

__all__ = ["api_boundary", "filter_frames", "OUR_FOLDERS"]

C = TypeVar("C", bound=Callable[..., Any])


def _our_folders() -> tuple[str, ...]:
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    passes = importlib.util.find_spec("pxla_mlir.passes")  # a folder of its own in a checkout (not imported)
    found = passes.submodule_search_locations if passes is not None else None
    return (package, *(os.path.abspath(p) for p in found or () if not p.startswith(package + os.sep)))


#: The folders whose frames a traceback leaves out: the package and its built-in passes.
OUR_FOLDERS = _our_folders()
for _folder in OUR_FOLDERS:
    traceback_util.register_exclusion(_folder)

#: The note jax's default mode adds to the exception it filtered.
_NOTE = "--------------------\n" + traceback_util._simplified_tb_msg


def _under_boundary(frame: FrameType) -> bool:
    """Is an entry point of ours or a jax ``api_boundary`` above ``frame``?"""
    f = frame.f_back
    while f is not None:
        code = f.f_code
        if code in ENTRY_POINTS or (code.co_name == "reraise_with_filtered_traceback"
                                    and code.co_filename == traceback_util.module_file):
            return True
        f = f.f_back
    return False


def filter_frames(e: BaseException) -> None:
    """Leaves out of ``e``'s traceback what jax's ``api_boundary`` would, in
    jax's mode; ``e`` is the exception caught by the entry point whose frame
    its traceback starts with. A bare ``raise`` must follow."""
    tb = e.__traceback__
    if tb is None or _under_boundary(tb.tb_frame):
        return
    mode = traceback_util._filtering_mode()
    if mode == "off":
        return
    if mode == "tracebackhide":  # IPython hides the frames marked so
        traceback_util._add_tracebackhide_to_hidden_frames(tb)
        return
    if mode not in ("quiet_remove_frames", "remove_frames"):
        raise ValueError(f"JAX_TRACEBACK_FILTERING={mode} is not a valid value.")
    e.with_traceback(traceback_util.filter_traceback(tb))
    if mode == "quiet_remove_frames":
        if _NOTE not in getattr(e, "__notes__", ()):  # a jax boundary below ours may have added it
            e.add_note(_NOTE)
    elif not isinstance(e.__cause__, traceback_util.UnfilteredStackTrace):
        # As jax: the whole traceback, as the cause of the filtered exception.
        unfiltered = traceback_util.UnfilteredStackTrace(
            f"{traceback_util.format_exception_only(e)}\n\n{traceback_util._jax_message_append}")
        unfiltered.with_traceback(traceback_util._add_call_stack_frames(tb))
        unfiltered.__cause__, unfiltered.__context__ = e.__cause__, e.__context__
        unfiltered.__suppress_context__ = e.__suppress_context__
        e.__cause__, e.__context__ = unfiltered, None


def api_boundary(fun: C) -> C:
    """``fun`` as an entry point (for calls whose one more frame costs nothing
    that matters: ``lower``, ``compile``; a map's call has its own ``except``)."""

    def entry(*args, **kwargs):
        try:
            return fun(*args, **kwargs)
        except Exception as e:
            filter_frames(e)
            raise

    ENTRY_POINTS.add(entry.__code__)  # one code object for every function wrapped
    return cast(C, functools.update_wrapper(entry, fun))
