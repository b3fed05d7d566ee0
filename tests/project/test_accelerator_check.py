"""bench/accelerator_check.py's CPU path (``--cpu --quick``) runs and prints
its whole table, every case equal to jax; without ``--cpu`` on a CPU-only
host it skips with one line and exits 0. Each run is a process of its own
with a hard timeout (the script starts child processes of its own)."""

import os
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.subprocess

SCRIPT = str(REPO / "bench" / "accelerator_check.py")
CASES = ["pmap, replica mode", "pmap, partition mode, sdy", "pmap, partition mode, gspmd", "xmap, replica lowering",
         "xmap, manual lowering", "xmap, vectorize lowering", "nested pmap, size-1 inner axis",
         "partitioned pmap (partitions=)", "pxla_mlir.jit of a pmap", "jax.debug.callback", "donation",
         "persistent cache, second process", "pxla-mlir run (module emitted on CPU)"]


def _env():
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PXLA_MLIR_CACHE_DIR")}
    env["JAX_PLATFORMS"] = "cpu"
    return env


@pytest.mark.slow
def test_cpu_quick_prints_the_table():
    proc = subprocess.run([sys.executable, SCRIPT, "--cpu", "--quick", "--cpu-devices", "2"], capture_output=True,
                          text=True, timeout=600, env=_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "accelerator_check: CPU, map size 2" in lines
    table = {line.split("  ")[0]: line for line in lines}
    for name in CASES:
        assert name in table and "equal to jax" in table[name], (name, proc.stdout)
    assert "  equal  " in table["pxla-mlir run --compare (CPU-emitted)"] + "  ", proc.stdout
    for name in ["dispatch: cached call, 1 arg", "dispatch: cached call, 100 args", "dispatch: host numpy arg",
                 "training: first step ratio", "training: step time ratio"]:
        assert "ratio " in table[name], (name, proc.stdout)
    assert "all-reduces" in table["training: optimized HLO"]
    assert "equal to jax" in table["training: params after 4 steps"]
    assert "error:" not in proc.stdout


def test_without_an_accelerator_it_skips():
    proc = subprocess.run([sys.executable, SCRIPT, "--quick"], capture_output=True, text=True, timeout=300,
                          env=_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines() == [
        "accelerator_check: no accelerator (jax's default backend is cpu); nothing checked. Run with --cpu to check "
        "the same cases on CPU devices."]
