"""Which candidates are interesting: the test runners and the evaluator that
asks them, each text once, several at a time.

A runner tests one candidate text (:class:`Runner`); :class:`ShellRunner`
runs a shell command on a file holding it, exit 0 meaning interesting (as
llvm-reduce, creduce and cvise read it); the built-in checks run in worker
processes (:mod:`.workers`). :class:`Evaluator` keeps every verdict by the
digest of the text, so that no text is tested twice, and tests a batch on
``jobs`` threads, returning the verdicts in the batch's order whatever
finishes first (the reduction is the same for every ``jobs``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import itertools
import os
import shlex
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import IO, Protocol

from pxla_mlir.mlir.reduce.candidate import digest

__all__ = ["Verdict", "Runner", "ShellRunner", "Evaluator", "command_for", "kill_group"]


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A test's answer on one candidate; ``detail`` says what it saw (for the message when the input is not
    interesting)."""

    interesting: bool
    detail: str = ""


class Runner(Protocol):
    """Tests candidate texts; ``test`` may run on several threads at once."""

    def test(self, text: str) -> Verdict: ...

    def close(self) -> None: ...


def command_for(command: str, path: str) -> str:
    """``command`` with the candidate's path substituted for each ``{}``, or appended as its last argument."""
    quoted = shlex.quote(path)
    return command.replace("{}", quoted) if "{}" in command else f"{command} {quoted}"


def kill_group(proc: subprocess.Popen) -> None:
    """Kills a process started in a session of its own, and everything it started."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # gone already
        os.killpg(proc.pid, signal.SIGKILL)


def _shell() -> list[str]:
    bash = shutil.which("bash")
    return [bash, "-c"] if bash else ["/bin/sh", "-c"]


class ShellRunner:
    """Runs ``command`` (by bash, or sh where there is no bash) on a file holding each candidate, in ``cwd``;
    a run past ``timeout`` seconds is killed and not interesting. ``wrap`` makes a candidate's file from its text
    (a reproducer's trailer added, so that a reproducer stays one)."""

    def __init__(self, command: str, *, directory: str, cwd: str | None = None, timeout: float | None = None,
                 wrap: Callable[[str], str] | None = None):
        self.command, self.directory, self.cwd, self.timeout, self.wrap = command, directory, cwd, timeout, wrap
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self._closed = False

    def test(self, text: str) -> Verdict:
        with self._lock:
            n = next(self._numbers)
        path = os.path.join(self.directory, f"candidate-{n}.mlir")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text if self.wrap is None else self.wrap(text))
        try:
            with open(f"{path}.err", "w+b") as err:
                verdict = self._run(command_for(self.command, path), err)
                if not verdict.interesting:
                    err.seek(0)
                    said = [line for line in err.read().decode("utf-8", "replace").splitlines() if line.strip()]
                    if said:  # what a test that fails for another reason (a tool not on PATH) said
                        verdict = Verdict(False, f"{verdict.detail}; its output ends with: {' / '.join(said[-3:])}")
                return verdict
        finally:
            os.unlink(path)
            os.unlink(f"{path}.err")

    def _run(self, command: str, err: IO[bytes]) -> Verdict:
        with self._lock:
            if self._closed:
                return Verdict(False, "stopped")
            proc = subprocess.Popen([*_shell(), command], cwd=self.cwd, stdin=subprocess.DEVNULL,
                                    stdout=err, stderr=subprocess.STDOUT, start_new_session=True)
            self._running.add(proc)
        try:
            status = proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.wait()
            return Verdict(False, f"the test ran past --timeout {self.timeout:g} s")
        except BaseException:  # Ctrl-C: the test goes too (it runs in a session of its own)
            kill_group(proc)
            proc.wait()
            raise
        finally:
            with self._lock:
                self._running.discard(proc)
        if status == 0:
            return Verdict(True)
        how = f"was killed by signal {-status}" if status < 0 else f"exits {status}"
        return Verdict(False, f"the test {how}")

    def close(self) -> None:
        """Kills the tests still running (after an interrupt)."""
        with self._lock:
            self._closed = True
            running = list(self._running)
        for proc in running:
            kill_group(proc)


@dataclasses.dataclass
class Counts:
    tested: int = 0  # test runs
    repeats: int = 0  # candidates whose text was tested before
    invalid: int = 0  # candidates that did not verify (never tested)
    larger: int = 0  # candidates no smaller than the best (never tested)


class Evaluator:
    """Verdicts on candidate texts, each text tested at most once, up to ``jobs`` at a time."""

    def __init__(self, runner: Runner, jobs: int = 1):
        self.runner, self.jobs = runner, max(1, jobs)
        self.counts = Counts()
        self._known: dict[str, Verdict] = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(self.jobs, thread_name_prefix="reduce-test") \
            if self.jobs > 1 else None

    def verdicts(self, texts: Sequence[str]) -> list[Verdict]:
        keys = [digest(t) for t in texts]
        todo: dict[str, str] = {}
        for key, text in zip(keys, texts):
            if key in self._known or key in todo:
                self.counts.repeats += 1
            else:
                todo[key] = text
        if self._pool is None or len(todo) < 2:
            for key, text in todo.items():
                self._known[key] = self.runner.test(text)
                self.counts.tested += 1
        else:
            futures = {key: self._pool.submit(self.runner.test, text) for key, text in todo.items()}
            _wait(list(futures.values()))
            for key, future in futures.items():
                self._known[key] = future.result()
                self.counts.tested += 1
        return [self._known[key] for key in keys]

    def verdict(self, text: str) -> Verdict:
        return self.verdicts([text])[0]

    def close(self) -> None:
        self.runner.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _wait(futures: list[concurrent.futures.Future]) -> None:
    """Waits in short steps, so that Ctrl-C reaches the main thread while tests run."""
    pending = set(futures)
    while pending:
        _, pending = concurrent.futures.wait(pending, timeout=0.2)
