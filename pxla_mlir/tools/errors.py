"""User mistakes on the command line: one line on stderr, exit 2 (``ERROR_EXIT``).

Only a bug of pxla_mlir itself adds "set PXLA_DEBUG=1 for the traceback";
mistakes in the input, the flags or the user's own function are reported
without it (see :func:`describe`).
"""

import argparse
import os
import sys
import traceback
from collections.abc import Iterable

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.support.files import write_atomically
from pxla_mlir.mlir.support.suggest import did_you_mean

#: pxla-mlir's exit status for every error (1 means "differ" for diff, as for diff(1)).
ERROR_EXIT = 2


class CliError(PxlaUserError):
    """A mistake the command line reports as ``pxla-mlir: error: ...``."""


def write_output(path: str, text: str) -> None:
    """``text`` to ``path`` (``-``: stdout), whole or not at all (:mod:`pxla_mlir.mlir.support.files`); a path
    that cannot be written is one line."""
    if path == "-":
        sys.stdout.write(text)
        return
    try:
        write_atomically(path, text)
    except OSError as e:
        raise CliError(f"cannot write {path!r}: {e.strerror}") from None


class Choices(tuple):
    """argparse choices that also take any value starting with one of ``open_prefixes`` (``after:<pass>``):
    declared to argparse, a flag gets its invalid-choice error and did-you-mean as closed choices do."""

    open_prefixes: tuple[str, ...]

    def __new__(cls, names: Iterable[str], open_prefixes: tuple[str, ...] = ()):
        self = super().__new__(cls, (*names, *(f"{p}<{_what(p)}>" for p in open_prefixes)))
        self.open_prefixes = open_prefixes
        return self

    def __contains__(self, value) -> bool:
        if isinstance(value, str) and any(value.startswith(p) and value != p for p in self.open_prefixes):
            return True
        return super().__contains__(value)


def _what(prefix: str) -> str:
    return {"after:": "pass"}.get(prefix, "name")


def invalid_choice(value: str, choices: Iterable[str]) -> str:
    """argparse's "invalid choice: ... (choose from ...)", and the choice spelled most like ``value``."""
    names = list(choices)
    return (f"invalid choice: {value!r} (choose from {', '.join(map(repr, names))})"
            f"{did_you_mean(value, names)}")


def _int_from(low: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    return parse


#: argparse types: an integer >= 1, an integer >= 0 (numpy's seeds).
positive_int = _int_from(1, "a positive integer")
non_negative_int = _int_from(0, "an integer >= 0")


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STDLIB = os.path.dirname(os.__file__)


def _is_ours(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE)


def _user_frame(exc: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of the user's own code, if the error came from it:
    raised there, or in jax or the standard library called from there (not in
    pxla_mlir code the user's function called, which would be a bug of ours)."""
    frames = traceback.extract_tb(exc.__traceback__)
    for i in range(len(frames) - 1, -1, -1):
        name = frames[i].filename
        if _is_ours(name):
            return None
        if not (name.startswith("<") or "site-packages" in name or os.path.abspath(name).startswith(_STDLIB)):
            return frames[i]
    return None


def describe(exc: BaseException) -> tuple[str, bool]:
    """A one-line message for an error the command line caught, and whether it
    is a bug of pxla_mlir (the only case that deserves the PXLA_DEBUG hint)."""
    if isinstance(exc, PxlaUserError):
        lines = [l for l in str(exc).strip().splitlines() if not l.startswith("reproduce with:")]
        return " / ".join(lines[:1] + lines[1:3]) if lines else type(exc).__name__, False
    message = f"{type(exc).__name__}: {exc}"
    frame = _user_frame(exc)
    if frame is not None:  # raised in, or by a call from, the user's function
        return f"{message} (in {frame.name}, {frame.filename}:{frame.lineno})", False
    return message, True
