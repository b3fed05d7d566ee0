"""Maps under ``jax.disable_jit()``, as jax.pmap runs there.

jax.pmap (jax 0.10.2: ``jit(shard_map)``) runs its Python body on every call
under ``disable_jit``: jit calls the function instead of looking up its
trace, and shard_map evaluates the body eagerly. Code that watches or
patches what the body calls (counters, mocks, debuggers) sees every call.
pxla_mlir keeps that contract: under ``disable_jit`` a pmap or xmap traces
its body anew on every call (the body runs, with jax's ``disable_jit``
behaviour inside it: inner ``jax.jit`` calls run their functions, loops run
in Python), and runs the program of that trace; the compiled program of the
cached trace is reused when the new trace is the same program
(:func:`same_trace`), else the new one is lowered and compiled for that call
only (the caches keep what jit-enabled calls use). ``pxla_mlir.jit`` calls
its function, as ``jax.jit`` does.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from pxla_mlir.jaxbridge.jax_internals import core

__all__ = ["same_trace"]


def same_trace(a, b) -> bool:
    """Do two traced bodies (a front end's ``Traced``) make the same program?
    Field by field: jaxprs by their text and constants by value."""
    return type(a) is type(b) and _same(a, b)


def _same(x, y) -> bool:
    if isinstance(x, core.ClosedJaxpr):
        return (isinstance(y, core.ClosedJaxpr) and str(x.jaxpr) == str(y.jaxpr)
                and _same(tuple(x.consts), tuple(y.consts)))
    if isinstance(x, core.Jaxpr):
        return isinstance(y, core.Jaxpr) and str(x) == str(y)
    if not isinstance(x, type) and dataclasses.is_dataclass(x):
        return type(x) is type(y) and all(_same(getattr(x, f.name), getattr(y, f.name))
                                          for f in dataclasses.fields(x))
    if isinstance(x, (tuple, list)):
        return type(x) is type(y) and len(x) == len(y) and all(_same(p, q) for p, q in zip(x, y))
    if hasattr(x, "shape") and hasattr(x, "dtype"):  # constants: numpy or jax arrays
        if x is y:
            return True
        if not (hasattr(y, "shape") and hasattr(y, "dtype")) or x.shape != y.shape or x.dtype != y.dtype:
            return False
        if isinstance(x, core.Tracer) or isinstance(y, core.Tracer):
            return False
        try:  # bit for bit: -0.0 is not 0.0 here
            return np.asarray(x).tobytes() == np.asarray(y).tobytes()
        except Exception:  # no host view (extended dtypes): assume they differ
            return False
    try:
        return bool(x == y)
    except Exception:  # an == that does not give a bool
        return x is y
