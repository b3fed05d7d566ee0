"""At most ``INFLIGHT_WINDOW`` un-completed launches, process-wide.

XLA:CPU deadlocks, then aborts the process, when more than 32 launches with
collectives are un-completed on a device and the machine has fewer than
2 x devices cores (plain jax.pmap does it after ~40 un-blocked calls). Every
launch, on the Python and the C++ path, is remembered here; beyond the window
the oldest half is waited for (completed long ago in a loop: one C++ call
each, and one Python call every ``INFLIGHT_WINDOW // 2`` launches).

Only launches of programs over several CPU devices count (:func:`windowed`):
a program on one device has no rendezvous to deadlock in, other platforms
have no such limit, and jax.pmap leaves their queues as deep as the host
makes them. Waiting there would cost a host-bound training step time that
jax's does not spend (measured: ~10% of a small step on one CPU device).
"""

from __future__ import annotations

import collections

from pxla_mlir.jaxbridge.jax_internals import ArrayImpl

__all__ = ["INFLIGHT", "INFLIGHT_WINDOW", "remember_launch", "wait_for_oldest", "wait_for_launches", "windowed"]

#: Un-completed launches allowed before the oldest half is waited for.
INFLIGHT_WINDOW = 8
#: Remembered launches, oldest first. A deque's append and popleft are atomic,
#: so threads share it without a lock (a lock would cost a cached call more).
INFLIGHT: collections.deque = collections.deque()


def windowed(devices) -> bool:
    """Do launches on ``devices`` count against the window (a rendezvous of
    several XLA:CPU devices)?"""
    return len(devices) > 1 and any(d.platform == "cpu" for d in devices)


def remember_launch(fence) -> None:
    """Counts a launch against the window. ``fence`` tells when it completed:
    its token (the Python path) or one of its output arrays (the C++ path:
    all outputs of a launch complete together)."""
    INFLIGHT.append(fence)
    if len(INFLIGHT) > INFLIGHT_WINDOW:
        wait_for_oldest()


def wait_for_oldest() -> None:
    """Waits for the oldest half of the window (it is full)."""
    for _ in range(INFLIGHT_WINDOW // 2):
        try:
            oldest = INFLIGHT.popleft()
        except IndexError:  # another thread waited for every launch meanwhile
            return
        try:
            oldest.block_until_ready()
        except RuntimeError:  # an output since donated to a later launch (a chain of donating calls)
            wait_for_launches()
            return


def _waited(fence) -> bool:
    """Waits for ``fence``; False if it is an output since donated to a later
    launch (a chain of donating calls), which can no longer be waited on."""
    if type(fence) is ArrayImpl and fence.is_deleted():
        return False
    try:
        fence.block_until_ready()
    except RuntimeError:  # donated between the check and the wait
        return False
    return True


def wait_for_launches() -> None:
    """Blocks until every remembered launch has completed. A launch whose
    output was donated is covered by the later launch that consumed it."""
    pending = []
    while True:  # one by one: a launch another thread remembers meanwhile is waited for, never dropped
        try:
            pending.append(INFLIGHT.popleft())
        except IndexError:
            break
    for fence in pending:
        _waited(fence)
