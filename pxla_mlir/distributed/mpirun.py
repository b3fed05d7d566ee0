"""Running one program as N processes started by Open MPI's ``mpirun``.

Each process finds its run in the launcher's environment
(``OMPI_COMM_WORLD_SIZE``, ``OMPI_COMM_WORLD_RANK``, the coordinator host
from ``OMPI_MCA_orte_hnp_uri``: jax's cluster detection, which
:func:`pxla_mlir.distributed.initialize` reads when no ``PXLA_MP_*``
variables are set), so it joins through the same checks and failure
handling as a local launch. Each process's output goes to its own file
(``--output-filename``) and comes back as one :class:`~.launch.Finished` per
process; mpirun reports one exit status for the whole run, so every
process's ``returncode`` is that status. At the deadline mpirun gets
SIGTERM (it ends its processes) and, if still running after
:data:`GRACE_S`, SIGKILL.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence

from pxla_mlir.distributed.launch import ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID, Finished

__all__ = ["ENV_LAUNCHER", "GRACE_S", "MpirunError", "available", "command", "launch_mpirun"]

#: Set (to "mpirun") in every process mpirun starts for :func:`launch_mpirun`.
ENV_LAUNCHER = "PXLA_MP_LAUNCHER"
GRACE_S = 15.0


class MpirunError(RuntimeError):
    """mpirun is not installed or could not start."""


def available() -> bool:
    return shutil.which("mpirun") is not None


def command(argv: Sequence[str], count: int, *, output_dir: str, env: dict) -> list[str]:
    """The mpirun command line: ``count`` copies of ``argv`` on this host,
    ``env``'s variables exported to each."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise MpirunError("mpirun is not installed (Open MPI: apt-get install openmpi-bin); use the default "
                          "local launcher or install it")
    line = [mpirun, "-np", str(count), "--oversubscribe", "--output-filename", output_dir]
    if os.geteuid() == 0:
        line.append("--allow-run-as-root")  # Open MPI refuses root without it
    for name in sorted(env):
        line += ["-x", name]
    return line + list(argv)


def launch_mpirun(argv: Sequence[str], count: int, *, timeout_s: float, cpu_devices: int | None = None,
                  env: dict | None = None, cwd: str | None = None) -> list[Finished]:
    """Runs ``argv`` as ``count`` processes under mpirun and waits (at most
    ``timeout_s``); returns what each process printed (stdout, then stderr)."""
    exported = {"PYTHONUNBUFFERED": "1", ENV_LAUNCHER: "mpirun"}
    if cpu_devices is not None:
        flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
        exported.update({"XLA_FLAGS": " ".join(flags + [f"--xla_force_host_platform_device_count={cpu_devices}"]),
                         "JAX_NUM_CPU_DEVICES": str(cpu_devices)})
    # the run's coordinator and ids come from mpirun, not from an outer launch
    full_env = {k: v for k, v in (os.environ if env is None else env).items()
                if k not in (ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID)}
    full_env.update(exported)
    with tempfile.TemporaryDirectory(prefix="pxla-mpirun-") as out:
        line = command(argv, count, output_dir=out, env=exported)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(line, env=full_env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, text=True, errors="replace", start_new_session=True)
        except OSError as e:
            raise MpirunError(f"mpirun could not start: {e}") from None
        try:
            launcher_output, _ = proc.communicate(timeout=timeout_s)
            returncode: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                launcher_output, _ = proc.communicate(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                launcher_output, _ = proc.communicate()
            returncode = None
        seconds, wall = time.monotonic() - start, time.time()
        outputs = [_rank_output(pathlib.Path(out), i) for i in range(count)]
    if not any(outputs) and returncode:
        raise MpirunError(f"mpirun ended with exit {returncode} before starting the processes:\n"
                          f"{launcher_output.strip()[-2000:]}")
    return [Finished(i, returncode, text, seconds, wall) for i, text in enumerate(outputs)]


def _rank_output(out: pathlib.Path, rank: int) -> str:
    """What process ``rank`` printed: ``OUT/<job>/rank.<rank>/stdout`` and ``stderr``."""
    text = []
    for name in ("stdout", "stderr"):
        for path in sorted(out.glob(f"*/rank.{rank}/{name}")):
            text.append(path.read_text(errors="replace"))
    return "".join(text)
