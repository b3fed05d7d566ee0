"""Every process must launch the same program on the same devices: checked
once per executable, before its first launch, through the coordination
service's key-value store.

Without the check, processes that compiled different programs (another
shape, option or device order on one of them) block in their collectives
until gloo gives up after 30 s with ``DEADLINE_EXCEEDED``, or forever once
connected. Here each process publishes a short record of the program it is
about to launch first (the MHLO's hash, and the text if small, the device
ids in order) under the number of multi-process programs it launched
before, reads the other processes' records under the same number, and
raises ``ProgramMismatchError`` naming the difference. It costs one
key-value round trip per other process, once per executable.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import threading
import time

import jax

from ..jax_internals import distributed_client
from . import link
from .processes import MultiProcessError, spans_processes
from .settings import check_timeout

__all__ = ["ProgramMismatchError", "ProgramCheck", "check_before_launch", "CHECK_TIMEOUT_S"]

#: Seconds to wait for another process to reach the same launch; None:
#: PXLA_MP_CHECK_TIMEOUT, else 120 (read at each check).
CHECK_TIMEOUT_S: float | None = None
_POLL_MS = 500  # between looks at the run's link: a process that ended is not waited for
_TEXT_LIMIT = 256 * 1024  # MHLO longer than this is compared by hash only
_KEY = "pxla_mlir/programs"
_launches = itertools.count(1)
_launches_lock = threading.Lock()


class ProgramMismatchError(MultiProcessError):
    """The processes of a run are about to launch different programs."""


def check_before_launch(lowered) -> "ProgramCheck | None":
    """A check to run before the first launch of ``lowered``'s executable, or
    None when its devices belong to this process alone."""
    if not spans_processes(lowered.devices):
        return None
    return ProgramCheck(lowered)


class ProgramCheck:
    """Compares this process's program with every other process's, once."""

    def __init__(self, lowered):
        text = lowered.as_text()
        self.record = {
            "name": _name(lowered.mhlo().operation),
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "devices": [d.id for d in lowered.devices],
            "inputs": [av.str_short() for av in lowered.in_avals],
            "text": text if len(text) <= _TEXT_LIMIT else None,
        }
        self._lock = threading.Lock()
        self._done = False
        self._error: Exception | None = None

    def __call__(self) -> None:
        with self._lock:
            if self._error is not None:
                raise self._error
            if not self._done:
                try:
                    self._compare()
                except MultiProcessError as e:
                    self._error = e
                    raise
                self._done = True

    def _compare(self) -> None:
        client = distributed_client()
        if client is None:  # several processes without jax.distributed: nothing to compare through
            return
        me, count = jax.process_index(), jax.process_count()
        with _launches_lock:
            number = next(_launches)
        base = f"{_KEY}/{number}"
        client.key_value_set(f"{base}/{me}", json.dumps(self.record))
        timeout = CHECK_TIMEOUT_S if CHECK_TIMEOUT_S is not None else check_timeout()
        deadline = time.monotonic() + timeout
        for other in range(count):
            if other != me:
                theirs = self._read(client, f"{base}/{other}", other, number, timeout, deadline)
                differences = describe_difference(self.record, theirs, me, other)
                if differences:
                    raise ProgramMismatchError(
                        f"process {me} and process {other} are about to launch different programs as their "
                        f"multi-process launch #{number}: {differences}\nEvery process must launch the same maps, "
                        f"with the same shapes, options and devices, in the same order, or their collectives never "
                        f"meet. Nothing was launched.")

    def _read(self, client, key: str, other: int, number: int, timeout: float, deadline: float) -> dict:
        """Process ``other``'s record, waiting for it in slices while it still runs its program."""
        me, name = jax.process_index(), self.record["name"]
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            try:
                return json.loads(client.blocking_key_value_get(key, max(1, min(_POLL_MS, remaining_ms))))
            except Exception as e:  # jaxlib raises its runtime error type
                if "DEADLINE_EXCEEDED" not in str(e):
                    raise MultiProcessError(f"could not read process {other}'s program from the coordination "
                                            f"service: {str(e).splitlines()[0]}") from None
            run = link.current()
            if run is not None and run.peer_ended(other):
                raise ProgramMismatchError(
                    f"process {other} ended its program without reaching its multi-process launch #{number}, "
                    f"while process {me} is about to launch {name!r} there: it would wait forever. Every process "
                    f"must launch the same maps in the same order. Nothing was launched.")
            if remaining_ms <= 0:
                raise ProgramMismatchError(
                    f"process {other} did not reach its launch #{number} of a multi-process program within "
                    f"{timeout:g} s, while process {me} is about to launch {name!r} there. Every process must "
                    f"launch the same maps in the same order; one that takes another path or fails before "
                    f"launching leaves the others waiting (PXLA_MP_CHECK_TIMEOUT sets this wait)")


def describe_difference(mine: dict, theirs: dict, me: int, other: int) -> str:
    """'' when the records agree, else what differs, in words."""
    parts = []
    if mine["name"] != theirs["name"]:
        parts.append(f"{mine['name']!r} here, {theirs['name']!r} on process {other}")
    if mine["devices"] != theirs["devices"]:
        parts.append(f"device order {mine['devices']} here, {theirs['devices']} on process {other}")
    inputs = [(i, a, b) for i, (a, b) in enumerate(zip(mine.get("inputs", []), theirs.get("inputs", []))) if a != b]
    if inputs:
        i, a, b = inputs[0]
        parts.append(f"the global shapes of the inputs differ (input {i}: {a} here, {b} on process {other}). A host "
                     f"input to a map is this process's share of every mapped axis that spans processes, so every "
                     f"process must pass a share of the same shape (or all pass one global jax.Array)")
    if mine["sha256"] != theirs["sha256"]:
        if mine.get("text") is not None and theirs.get("text") is not None:
            diff = list(difflib.unified_diff(mine["text"].splitlines(), theirs["text"].splitlines(),
                                             f"process {me}", f"process {other}", n=0, lineterm=""))
            shown = diff[:14] + (["..."] if len(diff) > 14 else [])
            parts.append("the MHLO differs:\n" + "\n".join(shown))
        else:
            parts.append(f"the MHLO differs (sha256 {mine['sha256'][:12]} here, {theirs['sha256'][:12]} there)")
    return "; ".join(parts)


def _name(module) -> str:
    """The module's symbol name (a module read from text may have none)."""
    return str(module.attributes["sym_name"]).strip('"') if "sym_name" in module.attributes else "module"
