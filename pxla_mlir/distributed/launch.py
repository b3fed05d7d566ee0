"""Running one program as N local processes of a jax.distributed run.

Each process gets ``PXLA_MP_COORDINATOR`` (127.0.0.1 and a free port),
``PXLA_MP_NUM_PROCESSES``, ``PXLA_MP_PROCESS_ID`` (what
:func:`pxla_mlir.distributed.initialize` reads) and its number of virtual
CPU devices (``JAX_NUM_CPU_DEVICES`` and ``XLA_FLAGS``). Every process runs under a hard deadline:
at the deadline it is killed with SIGKILL (jax's preemption notifier
swallows SIGTERM). Used by ``pxla-mlir run --processes``, the tests and the
benchmarks.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

__all__ = ["ENV_COORDINATOR", "ENV_NUM_PROCESSES", "ENV_PROCESS_ID", "Finished", "free_port", "process_env",
           "launch"]

ENV_COORDINATOR = "PXLA_MP_COORDINATOR"
ENV_NUM_PROCESSES = "PXLA_MP_NUM_PROCESSES"
ENV_PROCESS_ID = "PXLA_MP_PROCESS_ID"


@dataclasses.dataclass
class Finished:
    """One process of a launch: how it ended, what it printed (stdout and stderr)."""

    index: int
    returncode: int | None  # None: killed at the deadline
    output: str
    seconds: float  # from the launch to its end
    ended_at: float  # time.time() at its end

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def describe(self) -> str:
        if self.returncode is None:
            return f"killed at the deadline after {self.seconds:.1f} s"
        if self.returncode < 0:
            return f"ended by {signal.Signals(-self.returncode).name} after {self.seconds:.1f} s"
        return f"exit {self.returncode} after {self.seconds:.1f} s"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_env(index: int, count: int, port: int, *, cpu_devices: int | None = None,
                base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    env.update({ENV_COORDINATOR: f"127.0.0.1:{port}", ENV_NUM_PROCESSES: str(count), ENV_PROCESS_ID: str(index),
                "PYTHONUNBUFFERED": "1"})
    if cpu_devices is not None:
        flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
        env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={cpu_devices}"])
        env["JAX_NUM_CPU_DEVICES"] = str(cpu_devices)  # jax's own setting, which wins over XLA_FLAGS
    return env


def launch(argv: Sequence[str], count: int, *, timeout_s: float, cpu_devices: int | None = None,
           env: dict | None = None, cwd: str | None = None,
           on_line: Callable[[int, str], None] | None = None) -> list[Finished]:
    """Runs ``argv`` as ``count`` processes and waits for all of them (at most
    ``timeout_s`` in all; the rest are SIGKILLed). ``on_line(index, line)``
    sees each output line as it comes."""
    port = free_port()
    start = time.monotonic()
    procs, outputs, readers = [], [[] for _ in range(count)], []
    ended: list[float | None] = [None] * count  # seconds after start at which each process ended
    late: set[int] = set()
    try:
        for i in range(count):
            procs.append(subprocess.Popen(
                list(argv), env=process_env(i, count, port, cpu_devices=cpu_devices, base=env), cwd=cwd,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                errors="replace", start_new_session=True))
        readers = [threading.Thread(target=_read, args=(i, p, outputs[i], on_line, ended, start), daemon=True)
                   for i, p in enumerate(procs)]
        for r in readers:
            r.start()
        deadline = start + timeout_s
        for r in readers:  # each reader records when its process ended (in any order)
            r.join(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        for i, p in enumerate(procs):
            if p.poll() is None:
                late.add(i)
                p.kill()  # SIGKILL: SIGTERM is swallowed by jax's preemption notifier
        for p in procs:
            p.wait()
    for r in readers:
        r.join(timeout=5)
    now, wall = time.monotonic(), time.time()
    results = []
    for i, p in enumerate(procs):
        end = ended[i]
        if end is not None and i not in late:
            returncode, seconds = p.returncode, end
        else:
            returncode, seconds = None, now - start
        results.append(Finished(i, returncode, "".join(outputs[i]), seconds, wall - (now - start) + seconds))
    return results


def _read(index: int, proc, sink: list, on_line, ended: list, start: float) -> None:
    for line in proc.stdout:
        sink.append(line)
        if on_line is not None:
            on_line(index, line)
    proc.wait()
    ended[index] = time.monotonic() - start
