"""The base of every error that means "the input is wrong", not "pxla_mlir is broken".

Each user-facing error type mixes in :class:`PxlaUserError` next to the
builtin type its users catch (``class MeshError(PxlaUserError, ValueError)``),
so the command line can tell a mistake (one line) from a bug of ours (one
line plus the PXLA_DEBUG hint) with one ``isinstance`` check.

:data:`ENTRY_POINTS` holds the code of the package's entry points (a map's
call, ``lower``, ``compile``, the command line): the outermost of them on
the stack decides what an escaping exception's traceback shows
(:mod:`pxla_mlir.jaxbridge.tracebacks`). It lives here, without jax, so the
command line can be one.
"""

from collections.abc import Callable
from types import CodeType
from typing import Any, TypeVar

__all__ = ["PxlaUserError", "ENTRY_POINTS", "entry_point"]

F = TypeVar("F", bound=Callable[..., Any])

#: The code objects of the entry points (compared by identity on the way up the stack of an error only).
ENTRY_POINTS: set[CodeType] = set()


def entry_point(fun: F) -> F:
    """Marks ``fun`` as an entry point, unchanged: no wrapper, nothing per call."""
    ENTRY_POINTS.add(fun.__code__)
    return fun


class PxlaUserError(Exception):
    """A mistake in a program, a module, a flag or an argument; the message says how to fix it."""
