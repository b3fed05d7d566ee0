"""Every process must launch the same program on the same devices: checked
before every launch, through the coordination service's key-value store.

Without the check, processes that launch different programs pair their
collectives anyway (gloo matches them by order, not by program): one
process's all-reduce meets another program's, and the results are wrong
with no error; or they block until gloo gives up after 30 s. Here the
multi-process launches of a process are numbered in the order they are
launched; before launch #n each process publishes the fingerprint of the
program it is about to launch (a hash of its MHLO and device order) under
#n and reads every other process's. Only when two differ does each process
publish its whole record (name, device ids, MHLO text if small) and read
the others', to raise ``ProgramMismatchError`` naming the difference.
Nothing is launched then.

Cost per launch: one key-value write and one blocking read per other
process; the launch numbering and the launch itself happen under one lock,
so threads cannot launch in another order than they numbered. Each process
deletes its own fingerprints in blocks of :data:`_BLOCK` launches, once
every process has passed the block, so the store stays small.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import threading
import time
import weakref
from collections.abc import Callable
from typing import TypeVar

import jax

from pxla_mlir.distributed import link
from pxla_mlir.distributed.processes import MultiProcessError, spans_processes
from pxla_mlir.distributed.settings import check_timeout
from pxla_mlir.jaxbridge.jax_internals import distributed_client

__all__ = ["ProgramMismatchError", "LaunchAgreement", "check_before_launch", "CHECK_TIMEOUT_S",
           "describe_difference"]

#: Seconds to wait for another process to reach the same launch; None:
#: PXLA_MP_CHECK_TIMEOUT, else 120 (read at each check).
CHECK_TIMEOUT_S: float | None = None
_POLL_MS = 500  # between looks at the run's link: a process that ended is not waited for
_TEXT_LIMIT = 256 * 1024  # MHLO longer than this is compared by hash only
_KEY = "pxla_mlir/launch"
_BLOCK = 1024  # fingerprints are deleted a block at a time
_RECORD_WAIT_S = 10.0  # a mismatching peer publishes its record at once
_state = {"launches": 0}
_lock = threading.Lock()  # numbering and launching, together

T = TypeVar("T")


class ProgramMismatchError(MultiProcessError):
    """The processes of a run are about to launch different programs."""


def check_before_launch(lowered) -> LaunchAgreement | None:
    """The agreement every launch of ``lowered``'s executable goes through,
    or None when its devices belong to this process alone."""
    if not spans_processes(lowered.devices):
        return None
    return LaunchAgreement(lowered)


class LaunchAgreement:
    """Runs a launch once every process is about to launch the same program."""

    def __init__(self, lowered):
        # The program by its facts (runtime/module_facts.py): a warm start parses no module for its agreement.
        facts = lowered.to_compile().facts
        self.name = facts.name or "module"
        self.sha256 = facts.digest.hex()  # of the module's text without locations, as_text()
        self.devices = [d.id for d in lowered.devices]
        self.inputs = [av.str_short() for av in lowered.layout.in_avals]
        self._lowered = weakref.ref(lowered)  # printed only for a mismatch's record (weak: it may be gone then)
        devices = hashlib.sha256(json.dumps(self.devices).encode()).hexdigest()
        self.fingerprint = f"{self.sha256[:32]}:{devices[:16]}"

    @property
    def record(self) -> dict:
        """What a mismatch publishes for the other processes to name the difference."""
        lowered = self._lowered()
        text = lowered.as_text() if lowered is not None else None
        return {"name": self.name, "sha256": self.sha256, "devices": self.devices, "inputs": self.inputs,
                "text": text if text is not None and len(text) <= _TEXT_LIMIT else None}

    def __call__(self, launch: Callable[[], T]) -> T:
        client = distributed_client()
        if client is None:  # several processes without jax.distributed: nothing to compare through
            return launch()
        with _lock:
            # A refused launch uses up its number on every process (each sees the mismatch): none is reused.
            _state["launches"] = number = _state["launches"] + 1
            self._agree(client, number)
            if number % _BLOCK == 0:  # every process has reached #number: the block before is read
                _forget(client, number // _BLOCK - 1)
            return launch()

    def _agree(self, client, number: int) -> None:
        me, count = jax.process_index(), jax.process_count()
        timeout = CHECK_TIMEOUT_S if CHECK_TIMEOUT_S is not None else check_timeout()
        deadline = time.monotonic() + timeout
        client.key_value_set(_fingerprint_key(me, number), self.fingerprint)
        differing = [other for other in range(count) if other != me and self._read(
            client, _fingerprint_key(other, number), other, number, timeout, deadline) != self.fingerprint]
        if not differing:
            return
        mine = self.record
        client.key_value_set(f"{_KEY}/mismatch/{number}/{me}", json.dumps(mine))
        other = differing[0]
        try:
            theirs = json.loads(client.blocking_key_value_get(f"{_KEY}/mismatch/{number}/{other}",
                                                              int(_RECORD_WAIT_S * 1000)))
            differences = describe_difference(mine, theirs, me, other)
        except Exception:  # the peer did not say: still a mismatch
            differences = f"the programs' fingerprints differ (process {other} did not publish its record)"
        raise ProgramMismatchError(
            f"process {me} and process {other} are about to launch different programs as their multi-process "
            f"launch #{number}: {differences}\nEvery process must launch the same maps, with the same shapes, "
            f"options and devices, in the same order, or their collectives meet another program's (wrong "
            f"results) or never meet. Nothing was launched.")

    def _read(self, client, key: str, other: int, number: int, timeout: float, deadline: float) -> str:
        """Process ``other``'s fingerprint, waiting for it in slices while it still runs its program."""
        me, name = jax.process_index(), self.name
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            try:
                return client.blocking_key_value_get(key, max(1, min(_POLL_MS, remaining_ms)))
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


def _fingerprint_key(process: int, number: int) -> str:
    return f"{_KEY}/{process}/{number // _BLOCK}/{number}"


def _forget(client, block: int) -> None:
    """Deletes this process's fingerprints of ``block`` (a directory of the store)."""
    if block < 0:
        return
    with contextlib.suppress(Exception):  # cleaning up is best effort: a failure costs store memory only
        client.key_value_delete(f"{_KEY}/{jax.process_index()}/{block}")


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
