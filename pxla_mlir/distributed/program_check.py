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
import os
import threading

import jax

from ..jax_internals import distributed_client
from .processes import MultiProcessError, spans_processes

__all__ = ["ProgramMismatchError", "ProgramCheck", "check_before_launch", "CHECK_TIMEOUT_S"]

#: Seconds to wait for another process to reach the same launch
#: (PXLA_MP_CHECK_TIMEOUT overrides it).
CHECK_TIMEOUT_S = float(os.environ.get("PXLA_MP_CHECK_TIMEOUT", "120"))
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
        for other in range(count):
            if other == me:
                continue
            try:
                theirs = json.loads(client.blocking_key_value_get(f"{base}/{other}", int(CHECK_TIMEOUT_S * 1000)))
            except Exception as e:  # jaxlib raises its runtime error type
                if "DEADLINE_EXCEEDED" not in str(e):
                    raise MultiProcessError(f"could not read process {other}'s program from the coordination "
                                            f"service: {str(e).splitlines()[0]}") from None
                raise ProgramMismatchError(
                    f"process {other} did not reach its launch #{number} of a multi-process program within "
                    f"{CHECK_TIMEOUT_S:g} s, while process {me} is about to launch {self.record['name']!r} there. "
                    f"Every process must launch the same maps in the same order; one that takes another path or "
                    f"fails before launching leaves the others waiting (PXLA_MP_CHECK_TIMEOUT sets this wait)"
                ) from None
            differences = describe_difference(self.record, theirs, me, other)
            if differences:
                raise ProgramMismatchError(
                    f"process {me} and process {other} are about to launch different programs as their "
                    f"multi-process launch #{number}: {differences}\nEvery process must launch the same maps, with "
                    f"the same shapes, options and devices, in the same order, or their collectives never meet. "
                    f"Nothing was launched.")


def describe_difference(mine: dict, theirs: dict, me: int, other: int) -> str:
    """'' when the records agree, else what differs, in words."""
    parts = []
    if mine["name"] != theirs["name"]:
        parts.append(f"{mine['name']!r} here, {theirs['name']!r} on process {other}")
    if mine["devices"] != theirs["devices"]:
        parts.append(f"device order {mine['devices']} here, {theirs['devices']} on process {other}")
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
