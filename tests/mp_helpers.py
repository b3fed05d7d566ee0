"""Multi-process test runs: N processes of one worker script on a free
127.0.0.1 port, each with its own virtual CPU devices, each under a hard
deadline (SIGKILL), their outputs collected."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

from conftest import REPO

from pxla_mlir.distributed.launch import Finished, launch

WORKER = REPO / "tests" / "multiprocess" / "worker.py"
_CASE = re.compile(r"^CASE (\S+) (OK|FAIL)(.*)$")


def run_worker(groups: Sequence[str], *, processes: int, devices: int, timeout_s: float = 240,
               env: dict | None = None) -> list[Finished]:
    """Runs tests/multiprocess/worker.py GROUPS in ``processes`` processes of ``devices`` CPU devices each."""
    return launch([sys.executable, str(WORKER), *groups], processes, timeout_s=timeout_s, cpu_devices=devices,
                  env=env, cwd=str(REPO))


def case_results(finished: Sequence[Finished]) -> dict[str, list[str]]:
    """{case: [outcome per process]}: 'OK' or 'FAIL why' ('missing' where a process did not report it)."""
    results: dict[str, list[str]] = {}
    for f in finished:
        for line in f.output.splitlines():
            m = _CASE.match(line)
            if m:
                results.setdefault(m[1], ["missing"] * len(finished))[f.index] = m[2] + m[3]
    return results


def summary(finished: Sequence[Finished], tail: int = 25) -> str:
    """How each process ended and the end of its output, for assertion messages."""
    parts = []
    for f in finished:
        lines = [line for line in f.output.splitlines() if "[Gloo]" not in line]
        parts.append(f"--- process {f.index}: {f.describe()}\n" + "\n".join(lines[-tail:]))
    return "\n".join(parts)


def env(**extra) -> dict:
    """The test environment plus ``extra`` variables."""
    import os

    return {**os.environ, **extra}
