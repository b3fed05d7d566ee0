"""The pytest plugin users get with the package: the device count as a pytest
option or ini setting (no XLA_FLAGS in the shell), the pxla_golden fixture
under ``-p no:legacypath`` (request.path, not the legacy fspath), and names
that another plugin's (pytest-golden's --update-goldens, golden) cannot clash with."""

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


def test_golden(pxla_golden):
    pxla_golden.check("plain.txt", "the same text\\n")
'''

#: A plugin with the plain names pytest-golden (and others) register: an option of the same name stops every run.
OTHER_PLUGIN = '''
import pytest


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true")
    parser.addoption("--cpu-devices", action="store")
    parser.addini("cpu_devices", help="the other plugin's")


@pytest.fixture
def golden():
    return "the other plugin's golden"


def test_the_other_plugins_golden_is_its_own(golden):
    assert golden == "the other plugin's golden"
'''


def run_pytest(tmp_path, *args, count, ini=""):
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS.format(count=count)))
    (tmp_path / "goldens").mkdir(exist_ok=True)
    (tmp_path / "goldens" / "plain.txt").write_text("the same text\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n" + ini)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES", "PYTEST_ADDOPTS")}
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"  # the option wins over it
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])  # -p other_goldens
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:legacypath", "-p", "no:cacheprovider",
                           *args], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


@pytest.mark.slow
def test_cpu_devices_option_and_golden_without_legacypath(tmp_path):
    proc = run_pytest(tmp_path, "--pxla-cpu-devices", "4", count=4)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout


@pytest.mark.slow
def test_cpu_devices_ini_setting(tmp_path):
    proc = run_pytest(tmp_path, count=3, ini="pxla_cpu_devices = 3\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("args, ini, said", [
    (("--pxla-cpu-devices", "0"), "", "--pxla-cpu-devices 0: expected a positive number of devices"),
    ((), "pxla_cpu_devices = many\n", "the ini setting pxla_cpu_devices = many: expected a positive number of devices"),
])
def test_bad_counts_are_usage_errors(tmp_path, args, ini, said):
    proc = run_pytest(tmp_path, *args, count=1, ini=ini)
    assert proc.returncode == 4, proc.stdout + proc.stderr  # pytest's usage error
    assert said in proc.stderr


@pytest.mark.slow
def test_a_plugin_with_the_plain_names_loads_beside_it(tmp_path):
    """pytest-golden registers --update-goldens and a golden fixture: with both plugins loaded, each option and
    fixture is its owner's (pytest would stop every run on a second --update-goldens)."""
    (tmp_path / "other_goldens.py").write_text(OTHER_PLUGIN)
    (tmp_path / "test_other.py").write_text("from other_goldens import test_the_other_plugins_golden_is_its_own\n")
    proc = run_pytest(tmp_path, "-p", "other_goldens", "--pxla-cpu-devices", "4", "--update-goldens",
                      "--cpu-devices", "x", count=4, ini="cpu_devices = theirs\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 passed" in proc.stdout


def test_the_options_sit_in_their_own_group(tmp_path):
    proc = run_pytest(tmp_path, "--help", count=1)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    group = proc.stdout.split("\npxla-mlir (golden MHLO files, virtual CPU devices):\n", 1)[1].split("\n\n", 1)[0]
    assert "--pxla-update-goldens" in group and "--pxla-cpu-devices=N" in group, group
    assert "pxla_cpu_devices" in proc.stdout
