"""The pytest plugin users get with the package: the device count as a pytest
option or ini setting (no XLA_FLAGS in the shell), and the golden fixture
under ``-p no:legacypath`` (request.path, not the legacy fspath)."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.subprocess  # each test runs pytest in a child process

USER_TESTS = '''
import jax
import pxla_mlir


def test_devices():
    assert jax.device_count() == {count}


def test_golden(golden):
    golden.check("plain.txt", "the same text\\n")
'''


def run_pytest(tmp_path, *args, count, ini=""):
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS.format(count=count)))
    (tmp_path / "goldens").mkdir(exist_ok=True)
    (tmp_path / "goldens" / "plain.txt").write_text("the same text\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n" + ini)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES", "PYTEST_ADDOPTS")}
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"  # the option wins over it
    env["JAX_PLATFORMS"] = "cpu"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:legacypath", "-p", "no:cacheprovider",
                           *args], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


@pytest.mark.slow
def test_cpu_devices_option_and_golden_without_legacypath(tmp_path):
    proc = run_pytest(tmp_path, "--cpu-devices", "4", count=4)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout


@pytest.mark.slow
def test_cpu_devices_ini_setting(tmp_path):
    proc = run_pytest(tmp_path, count=3, ini="cpu_devices = 3\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("args, ini, said", [
    (("--cpu-devices", "0"), "", "--cpu-devices 0: expected a positive number of devices"),
    ((), "cpu_devices = many\n", "the ini setting cpu_devices = many: expected a positive number of devices"),
])
def test_bad_counts_are_usage_errors(tmp_path, args, ini, said):
    proc = run_pytest(tmp_path, *args, count=1, ini=ini)
    assert proc.returncode == 4, proc.stdout + proc.stderr  # pytest's usage error
    assert said in proc.stderr
