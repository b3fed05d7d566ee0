"""Every benchmark script runs (with the smallest sizes) and prints its table:
``make bench`` cannot rot unnoticed. The numbers are not checked (tests never
assert times); each script runs in its own process with a hard timeout."""

import concurrent.futures
import os
import subprocess
import sys

import pytest
from conftest import REPO

#: Each script with arguments that make it quick; every script in bench/ must be listed.
SMOKE_ARGS = {
    "bench_dispatch.py": ["--rounds", "1", "--calls", "2"],
    "bench_dropin.py": ["--rounds", "1", "--calls", "2"],
    "bench_explore.py": ["--runs", "1"],
    "bench_first_result.py": ["--rounds", "1", "--programs", "tiny"],
    "bench_first_step_phases.py": ["--cpu", "--rounds", "1", "--blocks", "1", "--width", "16"],
    "bench_lowering.py": ["--rounds", "1", "--skip-scale"],
    "bench_memory.py": ["--signatures", "3", "--every", "3"],
    "bench_multiprocess.py": ["--calls", "2", "--rounds", "1", "--timeout", "240"],
    "bench_partitioned.py": ["--rounds", "1", "--calls", "2"],
    "bench_pass_scaling.py": ["--sizes", "100,200", "--repeat", "1"],
    "bench_plugins.py": ["--rows", "8", "--rounds", "1", "--calls", "2"],
    "bench_pmap.py": ["--rounds", "1", "--calls", "2", "--skip-unblocked"],
    "bench_pxla_opt.py": ["--sizes", "100", "--repeat", "1"],
    "bench_reduce.py": ["--ops", "120"],
    "bench_scale.py": ["--devices", "8", "--rounds", "1", "--signatures", "3"],
    "bench_training.py": ["--rounds", "1", "--steps", "1", "--first-rounds", "1", "--layers", "1", "--skip-hlo"],
    "bench_xmap.py": ["--rounds", "1", "--calls", "2"],
}
#: What a script does beyond one plain process: its test carries the mark too.
MARKS = {"bench_explore.py": pytest.mark.browser,  # opens the page in headless Chromium where it is installed
         "bench_multiprocess.py": pytest.mark.multiprocess}  # a launch of 2 jax processes

# The module fixture runs the scripts: under pytest-xdist one worker runs them all, once.
pytestmark = pytest.mark.xdist_group("bench_smoke")


def _run(script: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # each bench sets its own device count
    return subprocess.run([sys.executable, str(REPO / "bench" / script), *SMOKE_ARGS[script]], capture_output=True,
                          text=True, timeout=300, env=env, cwd=REPO)


@pytest.fixture(scope="module")
def results(request):
    """The runs of the scripts whose tests were selected (-m "not multiprocess" leaves bench_multiprocess.py out)."""
    chosen = sorted({item.callspec.params["script"] for item in request.session.items
                     if item.module is request.module and hasattr(item, "callspec")})
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return dict(zip(chosen, pool.map(_run, chosen)))


def test_every_bench_script_is_listed():
    assert sorted(p.name for p in (REPO / "bench").glob("bench_*.py")) == sorted(SMOKE_ARGS)


@pytest.mark.parametrize("script", [pytest.param(s, marks=MARKS.get(s, ())) for s in sorted(SMOKE_ARGS)])
@pytest.mark.subprocess
@pytest.mark.slow
def test_bench_script_runs(script, results):
    proc = results[script]
    assert proc.returncode == 0, f"{script} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert len(proc.stdout.strip().splitlines()) >= 3, f"{script} printed no table:\n{proc.stdout}"
