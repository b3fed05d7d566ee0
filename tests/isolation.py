"""Running test code that may abort the process (collective storms, deliberate
crashes) in a fresh interpreter with a hard timeout, so that one crash fails
one test instead of ending the whole pytest run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from conftest import REPO

#: tests/ and every folder under it that holds test modules: a child process imports a test module by its name,
#: as pytest does (test file names are unique across tests/: tests/project/test_layout.py checks it).
TEST_PATH = os.pathsep.join(str(d) for d in dict.fromkeys(
    [REPO / "tests", *sorted(f.parent for f in (REPO / "tests").rglob("test_*.py"))]))


class IsolatedFailure(AssertionError):
    """The isolated code crashed, hung or failed; the message says which."""


def run_isolated(code: str, *, timeout: float = 300) -> str:
    """Runs ``code`` (8 virtual CPU devices) and returns its stdout; raises
    :class:`IsolatedFailure` on a signal, a timeout or a non-zero exit."""
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu",
           "PYTHONPATH": os.pathsep.join([TEST_PATH, os.environ.get("PYTHONPATH", "")])}
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=REPO)
    except subprocess.TimeoutExpired as e:
        raise IsolatedFailure(f"no result after {timeout:.0f} s (killed); output so far:\n"
                              f"{(e.stdout or b'')[-2000:]!r}\n{(e.stderr or b'')[-2000:]!r}") from None
    if proc.returncode < 0:
        raise IsolatedFailure(f"killed by {signal.Signals(-proc.returncode).name}; stderr:\n{proc.stderr[-3000:]}")
    if proc.returncode != 0:
        raise IsolatedFailure(f"exit status {proc.returncode}; stderr:\n{proc.stderr[-3000:]}")
    return proc.stdout
