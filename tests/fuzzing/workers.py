"""Runs seeded fuzz cases in worker processes that survive crashes and hangs.

A fuzz module provides ``check(seed, index) -> (outcome, problem, detail)``:
the kind of a good result, what went wrong (None when nothing did) and text
to show. Workers call it in-process for many cases in a row and report each
one; a worker killed by a signal, or silent for longer than the timeout, is
replaced, and the case it was running is reported as a crash or a hang.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib
import json
import os
import pathlib
import resource
import subprocess
import sys
import time

TESTS = pathlib.Path(__file__).resolve().parents[1]


@dataclasses.dataclass
class Report:
    cases: int = 0
    outcomes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    failures: list[tuple[int, str, str]] = dataclasses.field(default_factory=list)  # (index, problem, detail)
    details: list[str] = dataclasses.field(default_factory=list)  # of every finished case
    seconds: float = 0.0

    def summary(self) -> str:
        kinds = ", ".join(f"{k}: {v}" for k, v in sorted(self.outcomes.items()))
        return f"{self.cases} cases in {self.seconds:.1f} s ({kinds}); {len(self.failures)} failures"


def serve(module: str, seed: int, indices: list[int], memory_limit: int | None = None) -> None:
    """Worker side: runs ``indices`` in order, one START and one DONE line each."""
    if memory_limit:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    check = importlib.import_module(module).check
    for i in indices:
        print(f"START {i}", flush=True)
        outcome, problem, detail = check(seed, i)
        print("DONE " + json.dumps({"i": i, "outcome": outcome, "problem": problem, "detail": detail[-4000:]}),
              flush=True)


def run(module: str, seed: int, indices: list[int], *, workers: int = 2, timeout: float = 60.0,
        env: dict | None = None, batch: int = 1000, memory_limit: int | None = None) -> Report:
    """Runs the cases in ``workers`` processes, each replaced by a fresh one after
    ``batch`` cases (so that caches and leaks of one case cannot pile up).
    ``memory_limit`` (bytes of address space) turns a runaway allocation into an
    error of that case instead of a visit from the machine's OOM killer."""
    report = Report(cases=len(indices))
    start = time.monotonic()
    shards = [_Shard(module, seed, indices[w::workers], timeout, env, batch, memory_limit) for w in range(workers)]
    while not all(s.finished for s in shards):
        for s in shards:
            s.step(report)
        time.sleep(0.01)
    report.seconds = time.monotonic() - start
    return report


class _Shard:
    """One worker process over a list of cases, restarted after a crash or hang."""

    def __init__(self, module: str, seed: int, indices: list[int], timeout: float, env: dict | None, batch: int,
                 memory_limit: int | None):
        self.module, self.seed, self.todo, self.timeout, self.batch = module, seed, list(indices), timeout, batch
        self.memory_limit = memory_limit
        self.env = {**os.environ, **(env or {})}
        self.current: int | None = None
        self.finished = not self.todo
        if self.todo:
            self._spawn()

    def _spawn(self) -> None:
        code = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); from fuzzing import workers; "
                f"workers.serve({self.module!r}, {self.seed}, {self.todo[:self.batch]!r}, {self.memory_limit!r})")
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=self.env, cwd=TESTS.parent)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buffer, self.since = "", time.monotonic()

    def step(self, report: Report) -> None:
        if self.finished:
            return
        self._consume(report)
        hung = self.current is not None and time.monotonic() - self.since > self.timeout
        if self.todo and self.proc.poll() is None and not hung:
            return
        if hung:
            self.proc.kill()
        rc = self.proc.wait()
        self._consume(report)  # what it wrote before it ended
        self.proc.stdout.close()
        if self.todo and (hung or rc != 0 or self.current is not None):
            lost = self.current if self.current is not None else self.todo[0]
            problem = f"no result after {self.timeout:.0f} s" if hung else \
                f"killed by signal {-rc}" if rc < 0 else f"worker exited with status {rc}"
            _record(report, lost, "", problem, "")
            self.todo.remove(lost)
            self.current = None
        if self.todo:  # the next batch gets a fresh process
            self._spawn()
        else:
            self.finished = True

    def _consume(self, report: Report) -> None:
        while True:
            try:
                data = os.read(self.proc.stdout.fileno(), 1 << 20)
            except BlockingIOError:
                break
            if not data:
                break
            self.buffer += data.decode("utf-8", "replace")
        *lines, self.buffer = self.buffer.split("\n")
        for line in lines:
            if line.startswith("START "):
                self.current, self.since = int(line.split()[1]), time.monotonic()
            elif line.startswith("DONE "):
                done = json.loads(line[5:])
                _record(report, done["i"], done["outcome"], done["problem"], done["detail"])
                self.todo.remove(done["i"])
                self.current = None


def _record(report: Report, index: int, outcome: str, problem: str | None, detail: str) -> None:
    report.outcomes[outcome if problem is None else problem.split(":")[0]] += 1
    report.details.append(detail)
    if problem is not None:
        report.failures.append((index, problem, detail))


def seeded_main(argv, *, doc: str, title: str, count_flag: str, default_count: int, show_help: str, check, run,
                env: dict, label: str = "case", shown=lambda lines: lines[-12:]) -> int:
    """The command line of a fuzz module: ``--<count_flag> N --seed S --workers W``, or ``--show SEED:INDEX``
    (one case in this process, its detail printed); exit 1 when a case failed."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(f"--{count_flag}", dest="count", type=int, default=default_count)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--show", metavar="SEED:INDEX", help=show_help)
    a = p.parse_args(argv)
    if a.show:
        os.environ.update(env)
        seed, index = map(int, a.show.split(":"))
        outcome, problem, detail = check(seed, index)
        print(detail)
        print(problem or outcome)
        return 1 if problem else 0
    report = run(a.seed, a.count, workers_count=a.workers)
    print(f"{title}, seed {a.seed}: {report.summary()}")
    for index, what, detail in report.failures[:30]:
        print(f"  {label} {a.seed}:{index}: {what}\n    " + "\n    ".join(shown(detail.strip().splitlines())))
    return 1 if report.failures else 0
