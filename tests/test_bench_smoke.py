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
    "bench_lowering.py": ["--rounds", "1", "--skip-scale"],
    "bench_memory.py": ["--signatures", "3", "--every", "3"],
    "bench_multiprocess.py": ["--calls", "2", "--rounds", "1", "--timeout", "240"],
    "bench_partitioned.py": ["--rounds", "1", "--calls", "2"],
    "bench_pmap.py": ["--rounds", "1", "--calls", "2", "--skip-unblocked"],
    "bench_pxla_opt.py": ["--sizes", "100", "--repeat", "1"],
    "bench_scale.py": ["--devices", "8", "--rounds", "1", "--signatures", "3"],
    "bench_training.py": ["--rounds", "1", "--steps", "1", "--first-rounds", "1", "--layers", "1", "--skip-hlo"],
    "bench_xmap.py": ["--rounds", "1", "--calls", "2"],
}


def _run(script: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # each bench sets its own device count
    return subprocess.run([sys.executable, str(REPO / "bench" / script), *SMOKE_ARGS[script]], capture_output=True,
                          text=True, timeout=300, env=env, cwd=REPO)


@pytest.fixture(scope="module")
def results():
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return dict(zip(SMOKE_ARGS, pool.map(_run, SMOKE_ARGS)))


def test_every_bench_script_is_listed():
    assert sorted(p.name for p in (REPO / "bench").glob("bench_*.py")) == sorted(SMOKE_ARGS)


@pytest.mark.parametrize("script", sorted(SMOKE_ARGS))
def test_bench_script_runs(script, results):
    proc = results[script]
    assert proc.returncode == 0, f"{script} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert len(proc.stdout.strip().splitlines()) >= 3, f"{script} printed no table:\n{proc.stdout}"
