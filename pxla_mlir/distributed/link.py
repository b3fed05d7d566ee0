"""The run's link: the connections the processes joined over
(:mod:`.rendezvous`), kept open with process 0 in the middle, so that every
process learns at once when another one fails, dies or ends its program
(gloo's collectives have no timeout once connected: without this, the
others would block until jax's timeouts abort them).

Each process sends process 0 one JSON line when it ends its program
(``{"bye": true}``, at exit or :func:`pxla_mlir.distributed.shutdown`) or
fails (``{"failed": why}``, an uncaught exception). Process 0 forwards
``{"ended": k}`` to the others and, when the run cannot go on, sends every
process ``{"end": why}``; each prints why and exits with
:data:`PEER_FAILED_EXIT`. The run cannot go on when

* a process failed (it exits with 1 itself);
* a connection closes without a word: the process was killed or crashed
  (the kernel closes its sockets at once, so this takes milliseconds;
  process 0's own death is seen by the others as its connection closing);
* a process ended its program and others have not ended theirs
  ``grace_s`` seconds later: they are probably blocked in a collective
  that needs it (``shutdown_timeout_seconds``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import selectors
import socket
import sys
import threading
import time

from pxla_mlir.distributed.rendezvous import LineReader, send
from pxla_mlir.jaxbridge.jax_internals import distributed_client

__all__ = ["PEER_FAILED_EXIT", "Link", "current"]

#: Exit code of a process ended because another process of the run failed.
PEER_FAILED_EXIT = 75
_GONE_WAIT_S = 3.0  # process 0 waits this long for the others to end first (it hosts jax's service)
_TICK_S = 0.25

_current: Link | None = None


def current() -> Link | None:
    """The link of this process's run, or None."""
    return _current


class Link:
    """One process's side of the link."""

    def __init__(self, me: int, count: int, sockets: dict[int, socket.socket], grace_s: float):
        self.me, self.count, self.grace_s = me, count, grace_s
        self.sockets = dict(sockets)
        self.ended: dict[int, float] = {}  # process -> time.monotonic() when it ended its program
        self._lock = threading.Lock()
        self._said_bye = False
        self._ending = False
        self.jax_started = False  # set once jax.distributed.initialize returned
        self._wake_r, self._wake_w = socket.socketpair()
        self._local: list[tuple[str, str]] = []  # process 0: its own events, for the link thread
        self._thread = threading.Thread(target=self._run_hub if me == 0 else self._run_spoke,
                                        name="pxla_mlir-run-link", daemon=True)

    def start(self) -> None:
        global _current
        _current = self
        previous = sys.excepthook

        def excepthook(etype, value, tb):
            previous(etype, value, tb)
            if self.over():  # after jax.distributed.shutdown: nothing left to end
                return
            first = (str(value).strip().splitlines() or [""])[0][:300]
            self.fail(f"process {self.me} failed with {etype.__name__}: {first}")

        sys.excepthook = excepthook
        atexit.register(self.bye)  # runs before jax's exit handler (registered earlier) waits for the others
        self._thread.start()

    # -- this process's own events -----------------------------------------------------------------
    def bye(self) -> None:
        """This process has ended its program (idempotent)."""
        with self._lock:
            if self._said_bye or self._ending:
                return
            self._said_bye = True
        if self.me == 0:  # told here, before this process can exit: the others must not take its end for a death
            self._ended(0)
            self._post("bye", "")
        else:
            self._send(0, {"bye": True})

    def fail(self, why: str) -> None:
        """This process failed: every other process is ended, then this one (exit 1)."""
        if self.me == 0:
            self._post("failed", why)
            time.sleep(_GONE_WAIT_S + 5.0)  # the link thread ends the process; this is a fallback
        else:
            self._send(0, {"failed": why})
        _end(f"pxla_mlir: process {self.me} ends after an uncaught exception; the other processes are told to "
             f"end too.", 1)

    def abandon(self, why: str) -> None:
        """This process cannot take part (it raises ``why`` itself): every other process is ended."""
        self._ending = True
        if self.me == 0:
            self._abandoned = threading.Event()
            self._post("abandon", why)
            self._abandoned.wait(_GONE_WAIT_S + 5.0)
        else:
            self._send(0, {"failed": why})
            with contextlib.suppress(OSError):
                self.sockets[0].close()

    def over(self) -> bool:
        """The run's collectives are over: jax.distributed was shut down (a barrier every process passed)."""
        return self.jax_started and distributed_client() is None

    def peer_ended(self, process: int) -> bool:
        return process in self.ended

    def _post(self, kind: str, why: str) -> None:
        with self._lock:
            self._local.append((kind, why))
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _send(self, k: int, message: dict) -> bool:
        sock = self.sockets.get(k)
        if sock is None:
            return False
        try:
            with self._lock:
                send(sock, message)
            return True
        except OSError:
            return False

    # -- process 0 ------------------------------------------------------------------------------------
    def _run_hub(self) -> None:
        selector = selectors.DefaultSelector()
        readers = {}
        for k, sock in self.sockets.items():
            readers[sock] = (k, LineReader(sock))
            selector.register(sock, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        while not self.over():
            for key, _ in selector.select(_TICK_S):
                if key.fileobj is self._wake_r:
                    self._wake_r.recv(4096)
                    with self._lock:
                        events, self._local = self._local, []
                    for kind, why in events:
                        if kind == "failed":
                            self._end_all(why, own=1)
                        if kind == "abandon":
                            self._end_all(why, own=0)
                            self._abandoned.set()
                            return
                    continue
                k, reader = readers[key.fileobj]
                for message in reader.feed():
                    if isinstance(message, dict) and "failed" in message:
                        self._end_all(str(message["failed"]), skip=k)
                    elif isinstance(message, dict) and message.get("bye"):
                        self._ended(k)
                if reader.closed:
                    selector.unregister(key.fileobj)
                    del self.sockets[k]
                    if k not in self.ended and not self.over():
                        self._end_all(f"process {k} ended without a word (killed by a signal, crashed, or "
                                      f"os._exit) while the run was going: collectives over its devices can never "
                                      f"complete")
            if not self.over():
                self._check_grace()

    def _ended(self, k: int) -> None:
        if k in self.ended:
            return
        self.ended[k] = time.monotonic()
        for other in list(self.sockets):
            if other != k:
                self._send(other, {"ended": k})

    def _check_grace(self) -> None:
        if not self.ended or len(self.ended) == self.count:
            return
        first, when = min(self.ended.items(), key=lambda item: item[1])
        if time.monotonic() - when < self.grace_s:
            return
        running = [k for k in range(self.count) if k not in self.ended]
        self._end_all(
            f"process {first} ended its program {self.grace_s:g} s ago and {_processes(running)} "
            f"{'is' if len(running) == 1 else 'are'} still running: a collective that waits for process {first} "
            f"never completes. Every process must launch the same maps; if a process has work of its own after its "
            f"last collective, allow it more time with shutdown_timeout_seconds (PXLA_MP_SHUTDOWN_TIMEOUT, now "
            f"{self.grace_s:g} s)")

    def _end_all(self, why: str, *, skip: int | None = None, own: int | None = None) -> None:
        """Ends every other process (except ``skip``, which ends itself), then this one: with
        PEER_FAILED_EXIT, or ``own`` after its own failure (0: it does not exit, it raises)."""
        self._ending = True
        if own is None:
            _say(why, self.me)
        for k in list(self.sockets):
            if k != skip:
                self._send(k, {"end": why})
        deadline = time.monotonic() + _GONE_WAIT_S
        for sock in list(self.sockets.values()):  # the others end first: this process hosts jax's service
            try:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                while sock.recv(4096):
                    pass
            except OSError:
                pass
        if own == 0:
            for sock in self.sockets.values():
                sock.close()
            return
        if own is not None:
            _end(f"pxla_mlir: process {self.me} ends after an uncaught exception; the other processes were told "
                 f"to end too.", own)
        _end("", PEER_FAILED_EXIT)

    # -- processes 1..n-1 -------------------------------------------------------------------------------
    def _run_spoke(self) -> None:
        reader = LineReader(self.sockets[0])
        while not reader.closed:
            for message in reader.feed():
                if not isinstance(message, dict):
                    continue
                if "end" in message:
                    self._ending = True
                    _say(str(message["end"]), self.me)
                    _end("", PEER_FAILED_EXIT)
                if "ended" in message:
                    self.ended[int(message["ended"])] = time.monotonic()
        if 0 not in self.ended and not self._ending and not self.over():
            _say("process 0 ended without a word (killed by a signal, crashed, or os._exit) while the run was "
                 "going: it hosts the run's coordination service, and collectives over its devices can never "
                 "complete", self.me)
            _end("", PEER_FAILED_EXIT)


def _say(why: str, me: int) -> None:
    print(f"pxla_mlir: {why}\npxla_mlir: ending process {me} too (exit {PEER_FAILED_EXIT}): the run cannot go on.",
          file=sys.stderr, flush=True)


def _processes(ids) -> str:
    ids = list(ids)
    return ("process " if len(ids) == 1 else "processes ") + ", ".join(map(str, ids))


def _end(message: str, code: int) -> None:
    try:
        sys.stdout.flush()
        if message:
            print(message, file=sys.stderr, flush=True)
    finally:
        os._exit(code)
