"""The built-in checks' runner: worker processes (:mod:`.worker`) that stay up
between candidates, one per job, so that a candidate costs the check alone,
not a Python start and its imports (jax's, for the checks that compile).

A worker that crashes on a candidate (a pass or XLA that aborts) reports
``crashed (signal N)`` as the candidate's failure, with the end of what it
printed as the note, and is replaced; one that runs past the timeout is
killed, and the candidate is not interesting.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from typing import Any

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.reduce.evaluate import Verdict, kill_group

__all__ = ["WorkerError", "WorkerRunner", "matches"]

#: Seconds a worker may take to start (import jax, load plugins) before it is given up.
START_TIMEOUT = 300.0


class WorkerError(PxlaUserError, RuntimeError):
    """A check that cannot start in a worker process (a plugin that does not load there)."""


class _Died(Exception):
    def __init__(self, failure: str, note: str):
        super().__init__(failure)
        self.failure, self.note = failure, note


class _Worker:
    def __init__(self, spec: dict[str, Any], log: str):
        self.log_path = log
        self.log = open(log, "w+b")  # noqa: SIM115 (closed by kill(), when the worker goes)
        self.proc = subprocess.Popen([sys.executable, "-m", "pxla_mlir.mlir.reduce.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, start_new_session=True)
        self._buffer = b""
        self._mark = 0  # where the log stood when the current request was sent
        self._send(spec)
        reply = self.receive(START_TIMEOUT)
        if reply is None or "error" in reply:
            self.kill()
            raise WorkerError(f"the check does not start in a worker process: "
                              f"{reply['error'] if reply else 'it did not answer in time'}")

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode("utf-8"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: receive() says how

    def receive(self, timeout: float | None) -> dict[str, Any] | None:
        """The next reply (None: none within ``timeout`` seconds); raises :class:`_Died`."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                status = self.proc.wait()
                failure = f"crashed (signal {-status})" if status < 0 else f"exited {status}"
                raise _Died(failure, self._tail())
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def ask(self, path: str, timeout: float | None) -> dict[str, Any] | None:
        self.log.seek(0, os.SEEK_END)
        self._mark = self.log.tell()
        self._send({"path": path})
        return self.receive(timeout)

    def _tail(self) -> str:
        self.log.seek(self._mark)
        lines = [line for line in self.log.read().decode("utf-8", "replace").splitlines() if line.strip()]
        return "\n".join(lines[-8:])

    def kill(self) -> None:
        kill_group(self.proc)
        self.proc.wait()
        self.log.close()


def matches(report: dict[str, Any], expect: re.Pattern | None) -> bool:
    """Whether a report is interesting: a failure that ``expect`` finds (any failure, without one)."""
    failures = report.get("failures") or []
    return any(expect.search(f) for f in failures) if expect is not None else bool(failures)


class WorkerRunner:
    """Runs the check ``spec`` names (see :mod:`.worker`) in up to one worker per job; a candidate is
    interesting when a failure of its report matches ``expect`` (any failure when None)."""

    def __init__(self, spec: dict[str, Any], *, directory: str, expect: re.Pattern | None = None,
                 timeout: float | None = None):
        self.spec, self.directory, self.expect, self.timeout = spec, directory, expect, timeout
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._lock = threading.Lock()
        self._numbers = itertools.count()
        self._closed = False

    def _take(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise KeyboardInterrupt
            worker = self._idle.pop() if self._idle else None
            n = next(self._numbers)
        if worker is None:
            worker = _Worker(self.spec, os.path.join(self.directory, f"worker-{n}.log"))
        with self._lock:
            self._busy.add(worker)
        return worker

    def report(self, text: str) -> dict[str, Any]:
        """The check's report on ``text``: its failures (a crash is one), a note, its diagnostics."""
        worker = self._take()
        with self._lock:
            n = next(self._numbers)
        path = os.path.join(self.directory, f"candidate-{n}.mlir")
        alive = False
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            reply = worker.ask(path, self.timeout)
            if reply is None:
                return {"failures": [], "note": f"the check ran past --timeout {self.timeout:g} s"}
            alive = True
            return reply
        except _Died as died:
            return {"failures": [died.failure], "note": died.note}
        finally:
            if os.path.exists(path):
                os.unlink(path)
            with self._lock:
                self._busy.discard(worker)
                if alive and not self._closed:
                    self._idle.append(worker)
                    worker = None
            if worker is not None:
                worker.kill()

    def test(self, text: str) -> Verdict:
        report = self.report(text)
        if matches(report, self.expect):
            return Verdict(True)
        failures = report.get("failures") or []
        return Verdict(False, failures[0] if failures else report.get("note", ""))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers = [*self._idle, *self._busy]
            self._idle.clear()
        for worker in workers:
            worker.kill()
