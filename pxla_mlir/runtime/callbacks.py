"""Host callbacks that never fail inside XLA, and launches refused inside them.

A callback that raises fails its device's part of the program; the other
devices then wait in their next collective until XLA's rendezvous gives up
and aborts the process (~60 s later). So every callable handed to XLA is
wrapped (:class:`GuardedCallbacks`): an exception is kept, the callback
returns zeros of its declared results (read from the final module), every
device completes, and the launch raises the kept exception (the user's own
object, with a note saying where it came from) once it has completed.

A callback runs while its program holds the devices: a map launched from
it waits for them, and they wait for the callback. Such a launch is refused
with :class:`ReentrantLaunchError` (:func:`refuse_inside_callback`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence

import numpy as np
from jaxlib.mlir import ir

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.jaxbridge.jax_internals import ir_element_dtype
from pxla_mlir.mlir.core import ir_utils

__all__ = ["GuardedCallbacks", "ReentrantLaunchError", "refuse_inside_callback", "inside_callback",
           "callback_results"]

_TARGET = re.compile(r"xla_ffi(_partitioned)?_python_\w+_callback")
#: ``.name``: the map whose host callback this thread is running (no attribute: none).
RUNNING_CALLBACK = threading.local()


class ReentrantLaunchError(PxlaUserError, RuntimeError):
    """A map launched from inside a host callback of a running map."""


def inside_callback() -> str | None:
    """The name of the map whose host callback this thread runs, or None."""
    return getattr(RUNNING_CALLBACK, "name", None)


def refuse_inside_callback(what: str) -> None:
    """Raises :class:`ReentrantLaunchError` when called from a host callback."""
    outer = getattr(RUNNING_CALLBACK, "name", None)
    if outer is not None:
        raise ReentrantLaunchError(
            f"{what} was called from inside a host callback (jax.pure_callback, io_callback, jax.debug.callback) "
            f"of {outer}, which is still running: its launch would wait for the devices {outer} holds, and they "
            f"wait for this callback to return (a deadlock). Call it before or after {outer} and pass its result "
            f"in as an argument, or compute the value with NumPy inside the callback")


def callback_results(module: ir.Module) -> dict[int, tuple[int | None, list]]:
    """Per host-callback index: the position of its token operand (None: no
    token) and what XLA expects back, one entry per result ((shape, numpy
    dtype), or None for the token, which the callback hands back)."""
    found: dict[int, tuple[int | None, list]] = {}
    for op in ir_utils.walk(module.operation):
        if not op.name.endswith(".custom_call") or "call_target_name" not in op.attributes:
            continue
        target = op.attributes["call_target_name"]
        if not (isinstance(target, ir.StringAttr) and _TARGET.fullmatch(target.value)):
            continue
        config = op.attributes.get("backend_config")
        if not isinstance(config, ir.DictAttr) or "index" not in config:
            continue
        results = []
        for value in op.results:
            if isinstance(value.type, ir.RankedTensorType):
                t = ir.RankedTensorType(value.type)
                results.append((tuple(t.shape), ir_element_dtype(t.element_type)))
            else:
                results.append(None)  # !stablehlo.token / !mhlo.token
        token = next((i for i, v in enumerate(op.operands) if not isinstance(v.type, ir.RankedTensorType)), None)
        found[ir.IntegerAttr(config["index"]).value] = token, results
    return found


class GuardedCallbacks:
    """The callables of one executable, wrapped so that none raises into XLA
    (see the module docs); :meth:`raise_pending` raises what they kept."""

    def __init__(self, callbacks: Sequence[Callable], results: dict[int, tuple], what: str):
        self.what = what
        self._errors: list[BaseException] = []
        self._lock = threading.Lock()
        self.callables = [self._guard(fn, results.get(i)) for i, fn in enumerate(callbacks)]

    def _guard(self, fn: Callable, signature: tuple | None) -> Callable:
        if signature is None:  # not in the final module (nothing to stand in for): left as it is
            return fn
        token_at, results = signature
        what = self.what

        def guarded(*args):
            outer = getattr(RUNNING_CALLBACK, "name", None)
            RUNNING_CALLBACK.name = what
            try:
                return fn(*args)
            except BaseException as e:  # noqa: BLE001 - anything escaping here aborts the process later
                with self._lock:
                    self._errors.append(e)
                token = args[token_at] if token_at is not None else None
                return tuple(token if r is None else np.zeros(*r) for r in results)
            finally:
                RUNNING_CALLBACK.name = outer

        return guarded

    def raise_pending(self) -> None:
        """Raises the first exception a callback kept since the last call (with a note), if any."""
        with self._lock:
            errors, self._errors = self._errors, []
        if not errors:
            return
        first = errors[0]
        more = f" ({len(errors) - 1} more raised on other devices or calls)" if len(errors) > 1 else ""
        first.add_note(f"Raised in a host callback of {self.what}{more}. The launch was completed with zeros in "
                       f"place of that callback's results (an exception inside XLA would leave the other devices "
                       f"waiting in their collectives until the process aborts), and its outputs were dropped.")
        raise first
