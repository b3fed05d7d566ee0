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

# Every test starts processes; most launch several jax processes (marked multiprocess). Under pytest-xdist one
# worker runs the file: the runs' module fixtures start once, and two launches of 2 x 4 devices never overlap.
pytestmark = [pytest.mark.subprocess, pytest.mark.xdist_group("multiprocess")]

NUMERICS = [
    "flat_replica_local_input", "flat_partition_local_input", "flat_global_inputs",
    "flat_interleaved_devices_local_input", "per_process_pmap_on_local_devices", "key_and_float0_shares",
    "jax_jit_of_pmap_like_jax_pmap", "debug_nans_without_a_rerun",
    "nested_2x4_replica_all-gather", "nested_2x4_replica_all-reduce", "nested_2x4_partition_all-gather",
    "nested_2x4_partition_all-reduce", "nested_4x2_replica_all-gather", "nested_4x2_partition_all-reduce",
    "nested_interleaved_devices_inner_groups_span_processes",
    "grad_of_pmap", "vmap_of_pmap_local_input", "pxla_jit_of_grad_and_nested", "xmap_three_lowerings_over_shares",
    "grad_of_xmap_and_jit_over_shares", "jit_of_xmap_over_shares_three_lowerings", "grad_of_jit_over_shares",
    "out_axes_none_is_replicated", "unblocked_200_chained_calls", "unshard_all_reduce_exact_values", "empty_outputs",
]
ERRORS = ["devices_leave_a_process_out", "devices_cover_processes_unevenly", "too_many_devices_hint",
          "mismatched_module", "shares_that_disagree_between_processes", "jit_shares_that_disagree_or_are_computed",
          "initialize_twice",
          "every_launch_is_compared", "run_still_healthy_after_the_errors"]


@pytest.fixture(scope="module", params=[(2, 4), (4, 2)], ids=["2x4", "4x2"])
def run(request):
    processes, devices = request.param
    finished = mp_helpers.run_worker(["numerics", "errors"], processes=processes, devices=devices, timeout_s=300)
    return finished, mp_helpers.case_results(finished)


@pytest.mark.parametrize("name", NUMERICS + ERRORS)
@pytest.mark.multiprocess
@pytest.mark.slow
def test_case_on_every_process(run, name):
    finished, results = run
    assert name in results, f"case {name} did not run\n{mp_helpers.summary(finished)}"
    failed = [f"process {i}: {outcome}" for i, outcome in enumerate(results[name]) if not outcome.startswith("OK")]
    assert not failed, "\n".join(failed)


@pytest.mark.multiprocess
@pytest.mark.slow
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
@pytest.mark.multiprocess
@pytest.mark.slow
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


@pytest.mark.parametrize("victim", [1, 0], ids=["peer", "coordinator"])
@pytest.mark.multiprocess
@pytest.mark.slow
def test_killed_process_ends_the_survivor(victim):
    finished = mp_helpers.run_worker(["kill"], processes=2, devices=4, timeout_s=120,
                                     env=mp_helpers.env(MP_VICTIM=str(victim)))
    killed_at = _failure_time(finished, victim)
    survivor = finished[1 - victim]
    assert finished[victim].returncode == -9, mp_helpers.summary(finished)
    assert survivor.ended_at - killed_at < 30, mp_helpers.summary(finished)  # bounded, not timed
    if victim == 0 and survivor.returncode == -6:  # jax's client saw its service go first: its own abort
        assert "Terminating process because the JAX distributed service detected fatal errors" in survivor.output
        return
    assert survivor.returncode == PEER_FAILED_EXIT, mp_helpers.summary(finished)
    assert f"pxla_mlir: process {victim} ended without a word (killed by a signal, crashed, or os._exit)" in \
        survivor.output, mp_helpers.summary(finished)


@pytest.mark.parametrize("case", ["exit", "exit_then_launch"])
@pytest.mark.multiprocess
@pytest.mark.slow
def test_process_ending_early_is_an_error_at_the_next_launch(case):
    """Process 1 ends its program while process 0 goes on launching (the same map, or a new one): every
    launch is agreed first, so process 0's next launch raises instead of waiting in a collective."""
    finished = mp_helpers.run_worker([case], processes=2, devices=4, timeout_s=120)
    survivor = finished[0]
    assert survivor.returncode == 1, mp_helpers.summary(finished)  # the error is raised, uncaught in the worker
    assert "ProgramMismatchError: process 1 ended its program without reaching its multi-process launch #" in \
        survivor.output, mp_helpers.summary(finished)
    assert finished[1].returncode == PEER_FAILED_EXIT, mp_helpers.summary(finished)
    assert survivor.ended_at - _failure_time(finished, 1) < 30


# -- a run that cannot start ---------------------------------------------------------------------------

JOIN_WORKER = REPO / "tests" / "multiprocess" / "join_worker.py"


@pytest.mark.parametrize("scenario, expected", [
    ("bad_id", ["JOIN FAILED JoinError: process 2 (pid ", "cannot join the run: process_id=2 is out of range for "
                "num_processes=2: give each process its own id in 0..1",
                "JOIN FAILED ValueError: process_id=2 is out of range for num_processes=2"]),
    ("unreachable", ["JOIN FAILED JoinError: process 0 waited 4 s at 127.0.0.1:", "process 1 did not (joined: 0)",
                     "JOIN FAILED JoinError: process 1 could not reach the run's coordinator (process 0) at "
                     "127.0.0.1:", "within 4 s (Connection refused). Start process 0"]),
    ("never", ["JOIN FAILED JoinError: process 0 waited 4 s", "for the 2 processes of the run to join: process 1 "
               "did not (joined: 0). Start every process", "longer initialization_timeout (PXLA_MP_INIT_TIMEOUT)"]),
    ("port_in_use", ["JOIN FAILED JoinError: process 0 cannot listen on port ", "Address already in use. Another "
                     "program (or a run still ending) uses the port", "JOIN FAILED JoinError: process 1 reached "
                     "127.0.0.1:", "but nothing there answered as process 0 of the run within 4 s: another program "
                     "may use port"]),
], ids=["bad_id", "unreachable", "never", "port_in_use"])
@pytest.mark.multiprocess
@pytest.mark.slow
def test_run_that_cannot_start_is_an_error_on_every_process(scenario, expected):
    victim = 0 if scenario == "port_in_use" else 1
    finished = launch([sys.executable, str(JOIN_WORKER)], 2, timeout_s=60, cpu_devices=4, cwd=str(REPO),
                      env=mp_helpers.env(MP_SCENARIO=scenario, MP_VICTIM=str(victim), MP_SLEEP="5" if scenario == "never" else "10",
                                         # bad_id: the report reaches process 0 however late it starts
                                         PXLA_MP_INIT_TIMEOUT="20" if scenario == "bad_id" else "4"))
    text = "\n".join(f.output for f in finished)
    for f in finished:
        assert f.returncode == 0, mp_helpers.summary(finished)  # no abort, no hang
    for needle in expected:
        assert needle in text, f"{needle!r} not in\n{mp_helpers.summary(finished)}"
    assert "JOINED" not in text


# -- pxla-mlir run --processes ----------------------------------------------------------------------

def _cli(*args, **env):
    import subprocess

    return subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env=mp_helpers.env(**env))


def _outputs(stdout: str) -> str:
    return stdout[re.search(r"^output", stdout, re.M).start():]


@pytest.mark.parametrize("target", ["examples/nested_reduction.py:two_level_sum", "examples/xmap_2d.py:normalise_2d"])
@pytest.mark.multiprocess
@pytest.mark.slow
def test_cli_run_processes_matches_one_process(target):
    multi = _cli("run", target, "--calls", "2", "--processes", "2")
    assert multi.returncode == 0, multi.stderr[-3000:]
    assert "in 2 processes (4 each)" in multi.stderr
    assert re.search(r"steady-state call\s+[\d.]+ ms\s+[\d.]+ ms", multi.stdout), multi.stdout
    single = _cli("run", target, "--calls", "2")
    assert single.returncode == 0, single.stderr[-3000:]
    assert _outputs(multi.stdout) == _outputs(single.stdout)


@pytest.mark.multiprocess
@pytest.mark.slow
def test_cli_run_processes_runs_a_module(tmp_path):
    """A partition-mode module across 2 processes (XLA's layout of its global
    inputs, each process placing its pieces) prints what jax's nested vmap
    with the same collectives gives on the same inputs (--seed 0)."""
    import contextlib
    import io

    import jax
    import numpy as np

    from pxla_mlir.tools.running import print_outputs

    module = tmp_path / "nested_partition.mlir"
    emitted = _cli("emit", "examples/nested_reduction.py:two_level_sum", "--mode", "partition", "-o", str(module))
    assert emitted.returncode == 0, emitted.stderr[-3000:]
    multi = _cli("run", str(module), "--calls", "2", "--processes", "2")
    assert multi.returncode == 0, multi.stderr[-3000:]
    assert "in 2 processes (4 each)" in multi.stderr  # what ran on stderr, the results on stdout
    single = _cli("run", str(module))
    assert single.returncode == 0, single.stderr[-3000:]
    layout = [line for line in single.stderr.splitlines() if line.startswith("layout: ")]
    assert len(layout) == 1 and layout[0] in multi.stderr.splitlines()  # how the printed values lie, as in one process

    def per_device(v):  # examples/nested_reduction.py in plain jax
        local = jax.lax.psum(v, "device")
        return local, jax.lax.psum(local, "host")

    x = np.random.default_rng(0).normal(size=(2, 4, 128)).astype(np.float32)  # the run's input, --seed 0
    want = jax.vmap(jax.vmap(per_device, axis_name="device", out_axes=(1, 0)), axis_name="host")(x)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        print_outputs(want)
    assert _outputs(multi.stdout) == printed.getvalue()


def test_cli_run_processes_mistakes():
    result = _cli("--cpu-devices", "6", "run", "examples/nested_reduction.py:two_level_sum", "--processes", "4",
                  XLA_FLAGS="")
    assert result.returncode == 2
    assert "6 CPU devices cannot be split evenly between 4 processes" in result.stderr


def test_cli_run_processes_checks_a_module_before_starting_them():
    """A module XLA rejects is one line (exit 2), not one error per process."""
    result = _cli("run", "test/lit/Inputs/run_unknown_custom_call.mlir", "--processes", "2")
    assert result.returncode == 2 and "--- process" not in result.stderr
    assert result.stderr.splitlines() == ["pxla-mlir: error: test/lit/Inputs/run_unknown_custom_call.mlir: XLA rejected "
                                          "the module: NOT_FOUND: No registered implementation for untyped custom call "
                                          "to no_such_target for Host"]


_THREE_REPLICAS = """module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 3 : i32} {
  func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    return %a : tensor<3xf32>
  }
}
"""


@pytest.mark.parametrize("target, argv, what", [
    ("three.mlir", [], "three.mlir"),
    ("examples/pmap_demo.py:inner", ["--map", "pmap", "--axis-name", "j", "--arg", "f32[3,4]"],
     "examples/pmap_demo.py:inner"),
])
def test_cli_run_processes_checks_the_devices_split_before_starting_them(tmp_path, target, argv, what):
    """A program whose devices the processes cannot share evenly is one line from the launcher, in flags (not one
    error per process in the Python API's words: devices=, jax.config)."""
    (tmp_path / "three.mlir").write_text(_THREE_REPLICAS)
    target = str(tmp_path / target) if target.endswith(".mlir") else target
    result = _cli("run", target, *argv, "--processes", "2")
    assert result.returncode == 2 and "--- process" not in result.stderr and result.stdout == "", result.stderr
    assert result.stderr.splitlines() == [
        f"pxla-mlir: error: {str(tmp_path / what) if what.endswith('.mlir') else what} runs on 3 devices, which "
        f"--processes 2 cannot split evenly (every process feeds an equal share of them); run it with --processes 3 "
        f"(a count that divides 3, with --cpu-devices a multiple of it)"], result.stderr


# -- the launcher itself ------------------------------------------------------------------------------

@pytest.mark.multiprocess
@pytest.mark.slow
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
