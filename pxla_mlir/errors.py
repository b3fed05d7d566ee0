"""The base of every error that means "the input is wrong", not "pxla_mlir is broken".

Each user-facing error type mixes in :class:`PxlaUserError` next to the
builtin type its users catch (``class MeshError(PxlaUserError, ValueError)``),
so the command line can tell a mistake (one line) from a bug of ours (one
line plus the PXLA_DEBUG hint) with one ``isinstance`` check.
"""

__all__ = ["PxlaUserError"]


class PxlaUserError(Exception):
    """A mistake in a program, a module, a flag or an argument; the message says how to fix it."""
