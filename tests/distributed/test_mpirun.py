"""Multi-process runs started by Open MPI's mpirun (skipped where it is not
installed; .ci/run installs it as root on Debian): the processes get no
PXLA_MP_* variables and find their run in mpirun's environment, through the
same checks and failure handling as a local launch. 2 processes run the
numerics cases of tests/multiprocess/worker.py, 4 the error cases (the
program check among them), and a process that fails ends the others."""

import re
import subprocess
import sys

import mp_helpers
import pytest
from conftest import REPO
from test_multiprocess import ERRORS, NUMERICS, _outputs

from pxla_mlir.distributed import PEER_FAILED_EXIT
from pxla_mlir.distributed.mpirun import available, launch_mpirun

# Launches of 2 and 4 processes: under pytest-xdist on the worker that runs test_multiprocess.py's, one at a time.
pytestmark = [pytest.mark.skipif(not available(), reason="mpirun is not installed (Debian: apt-get install openmpi-bin)"),
              pytest.mark.multiprocess, pytest.mark.subprocess, pytest.mark.slow, pytest.mark.xdist_group("multiprocess")]


def run_worker(groups, *, processes, devices, timeout_s=300, env=None):
    return launch_mpirun([sys.executable, str(mp_helpers.WORKER), *groups], processes, timeout_s=timeout_s,
                         cpu_devices=devices, env=env, cwd=str(REPO))


@pytest.mark.parametrize("processes, devices, group, names",
                         [(2, 4, "numerics", NUMERICS), (4, 2, "errors", ERRORS)], ids=["2x4", "4x2"])
def test_cases_under_mpirun(processes, devices, group, names):
    finished = run_worker([group], processes=processes, devices=devices)
    results = mp_helpers.case_results(finished)
    assert sorted(results) == sorted(names), mp_helpers.summary(finished)
    failed = [f"{name} process {i}: {outcome}" for name in names for i, outcome in enumerate(results[name])
              if not outcome.startswith("OK")]
    assert not failed, "\n".join(failed)
    assert all(f.returncode == 0 and "WORKER DONE" in f.output for f in finished), mp_helpers.summary(finished)


def test_a_failing_process_ends_the_others():
    finished = run_worker(["raise"], processes=2, devices=4, timeout_s=120, env=mp_helpers.env(MP_VICTIM="1"))
    survivor = finished[0].output
    assert "FAILING_AT" in finished[1].output, mp_helpers.summary(finished)
    assert "process 1 failed with RuntimeError: deliberate failure in process 1" in survivor, \
        mp_helpers.summary(finished)
    assert f"ending process 0 too (exit {PEER_FAILED_EXIT})" in survivor
    assert finished[0].returncode not in (0, None)  # mpirun reports the run's failure, within the deadline


def test_cli_run_with_the_mpirun_launcher_matches_one_process():
    def cli(*args):
        return subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", "run", "--cpu-devices", "8", "--calls",
                               "2", "examples/nested_reduction.py:two_level_sum", *args], cwd=REPO,
                              capture_output=True, text=True, timeout=300)

    multi = cli("--processes", "2", "--launcher", "mpirun")
    assert multi.returncode == 0, multi.stdout + multi.stderr[-3000:]
    assert "in 2 processes started by mpirun (4 each)" in multi.stderr, multi.stderr
    assert re.search(r"steady-state call +[\d.]+ ms +[\d.]+ ms", multi.stdout), multi.stdout
    single = cli()
    assert single.returncode == 0, single.stderr[-3000:]
    assert _outputs(multi.stdout) == _outputs(single.stdout)
