"""pmap, xmap and pxla_mlir.jit across the processes of one jax.distributed run
on this machine: 2 processes x 4 CPU devices and 4 x 2, gloo collectives.

Each launch (tests/mp_helpers.py) runs many cases of tests/multiprocess/worker.py
in every process; a case passes when every process checked the pieces it holds
against a reference computed without pxla_mlir. Every process runs under a hard
deadline (SIGKILL).
"""

import re
import sys

import mp_helpers
import pytest
from conftest import REPO

from pxla_mlir.distributed import PEER_FAILED_EXIT
from pxla_mlir.distributed.launch import launch

NUMERICS = [
    "flat_replica_local_input", "flat_partition_local_input", "flat_global_inputs",
    "flat_interleaved_devices_local_input",
    "nested_2x4_replica_all-gather", "nested_2x4_replica_all-reduce", "nested_2x4_partition_all-gather",
    "nested_2x4_partition_all-reduce", "nested_4x2_replica_all-gather", "nested_4x2_partition_all-reduce",
    "nested_interleaved_devices_inner_groups_span_processes",
    "grad_of_pmap", "vmap_of_pmap_local_input", "pxla_jit_of_grad_and_nested", "xmap_three_lowerings",
    "out_axes_none_is_replicated", "unblocked_200_chained_calls",
]
ERRORS = ["devices_leave_a_process_out", "devices_cover_processes_unevenly", "too_many_devices_hint",
          "mismatched_module", "every_launch_is_compared", "run_still_healthy_after_the_errors"]


@pytest.fixture(scope="module", params=[(2, 4), (4, 2)], ids=["2x4", "4x2"])
def run(request):
    processes, devices = request.param
    finished = mp_helpers.run_worker(["numerics", "errors"], processes=processes, devices=devices, timeout_s=300)
    return finished, mp_helpers.case_results(finished)


@pytest.mark.parametrize("name", NUMERICS + ERRORS)
def test_case_on_every_process(run, name):
    finished, results = run
    assert name in results, f"case {name} did not run\n{mp_helpers.summary(finished)}"
    failed = [f"process {i}: {outcome}" for i, outcome in enumerate(results[name]) if not outcome.startswith("OK")]
    assert not failed, "\n".join(failed)


def test_every_process_ends_cleanly(run):
    finished, results = run
    assert sorted(results) == sorted(NUMERICS + ERRORS), "the worker's cases and this list differ"
    for f in finished:
        assert f.returncode == 0 and "WORKER DONE" in f.output, mp_helpers.summary(finished)


# -- a failing process ------------------------------------------------------------------------------

def _failure_time(finished, victim: int) -> float:
    match = re.search(r"FAILING_AT (\S+)", finished[victim].output)
    assert match, mp_helpers.summary(finished)
    return float(match[1])


@pytest.mark.parametrize("victim", [0, 1])
def test_uncaught_exception_ends_every_process(victim):
    finished = mp_helpers.run_worker(["raise"], processes=2, devices=4, timeout_s=120,
                                     env=mp_helpers.env(MP_VICTIM=str(victim)))
    failed_at = _failure_time(finished, victim)
    survivor = finished[1 - victim]
    assert finished[victim].returncode == 1, mp_helpers.summary(finished)
    assert survivor.returncode == PEER_FAILED_EXIT, mp_helpers.summary(finished)
    assert f"process {victim} failed with RuntimeError: deliberate failure in process {victim}" in survivor.output
    # Bounded, not timed: plain jax would leave the survivor blocked in gloo for good.
    assert survivor.ended_at - failed_at < 30, mp_helpers.summary(finished)


@pytest.mark.parametrize("victim, heartbeat", [(1, 5), (0, 5)], ids=["peer", "coordinator"])
def test_killed_process_ends_the_survivor(victim, heartbeat):
    finished = mp_helpers.run_worker(["kill"], processes=2, devices=4, timeout_s=120,
                                     env=mp_helpers.env(MP_VICTIM=str(victim), MP_HEARTBEAT=str(heartbeat)))
    killed_at = _failure_time(finished, victim)
    survivor = finished[1 - victim]
    assert finished[victim].returncode == -9, mp_helpers.summary(finished)
    assert survivor.ended_at - killed_at < heartbeat + 25, mp_helpers.summary(finished)
    if victim == 0 and survivor.returncode == PEER_FAILED_EXIT:  # pxla_mlir's watcher noticed first
        assert "lost the JAX coordination service" in survivor.output
        return
    assert survivor.returncode == -6, f"expected SIGABRT from jax's distributed runtime\n{mp_helpers.summary(finished)}"
    assert "Terminating process because the JAX distributed service detected fatal errors" in survivor.output
    if victim == 1:
        assert "stopped sending heartbeats" in survivor.output
    assert "_loop_until_peer_fails" in survivor.output, "faulthandler shows where the survivor was"


# -- pxla-mlir run --processes ----------------------------------------------------------------------

def _cli(*args, **env):
    import subprocess

    return subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env=mp_helpers.env(**env))


def _outputs(stdout: str) -> str:
    return stdout[re.search(r"^output", stdout, re.M).start():]


@pytest.mark.parametrize("target", ["examples/nested_reduction.py:two_level_sum", "examples/xmap_2d.py:normalise_2d"])
def test_cli_run_processes_matches_one_process(target):
    multi = _cli("run", target, "--calls", "2", "--processes", "2")
    assert multi.returncode == 0, multi.stderr[-3000:]
    assert "in 2 processes (4 each)" in multi.stdout
    assert re.search(r"steady-state call\s+[\d.]+ ms\s+[\d.]+ ms", multi.stdout), multi.stdout
    single = _cli("run", target, "--calls", "2")
    assert single.returncode == 0, single.stderr[-3000:]
    assert _outputs(multi.stdout) == _outputs(single.stdout)


def test_cli_run_processes_mistakes():
    result = _cli("--cpu-devices", "6", "run", "examples/nested_reduction.py:two_level_sum", "--processes", "4",
                  XLA_FLAGS="")
    assert result.returncode == 1
    assert "6 CPU devices cannot be split evenly between 4 processes" in result.stderr


# -- the launcher itself ------------------------------------------------------------------------------

def test_launch_gives_each_process_its_rank_and_kills_at_the_deadline(tmp_path):
    script = tmp_path / "p.py"
    script.write_text("import os, time\n"
                      "print(os.environ['PXLA_MP_PROCESS_ID'], os.environ['PXLA_MP_NUM_PROCESSES'],\n"
                      "      os.environ['PXLA_MP_COORDINATOR'].startswith('127.0.0.1:'), os.environ['XLA_FLAGS'],\n"
                      "      flush=True)\n"
                      "if os.environ['PXLA_MP_PROCESS_ID'] == '1': time.sleep(60)\n")
    finished = launch([sys.executable, str(script)], 2, timeout_s=3, cpu_devices=3)
    assert finished[0].returncode == 0 and finished[0].output.split()[:3] == ["0", "2", "True"]
    assert "--xla_force_host_platform_device_count=3" in finished[0].output
    assert finished[1].timed_out and finished[1].output.split()[:2] == ["1", "2"]
