"""The command line as a wheel installs it (not editable), used from a
directory outside the repository: ``python -m pxla_mlir``, the metadata the
wheel carries, and the examples it ships (listed, copied out and run).

The fixtures follow tests/project/test_installed_wheel.py: the wheel is built from a
clean copy of the checkout without network, and the fresh venv takes jax and
the other dependencies from the test environment's site-packages.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest
from conftest import REPO

pytestmark = [pytest.mark.subprocess, pytest.mark.slow, pytest.mark.xdist_group("installed_wheel")]

EXAMPLE_FILES = ("pmap_demo.py", "train_step.py", "nested_reduction.py", "xmap_2d.py", "per_device_psum.mlir")


def _run(argv, *, cwd, env=None, ok=True, timeout=300) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if ok:
        assert proc.returncode == 0, f"{' '.join(map(str, argv))} failed ({proc.returncode}):\n" \
                                     f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("dist")
    src = tmp_path_factory.mktemp("srccopy") / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info",
                                                             "__pycache__", "Output", ".pytest_cache"))
    _run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir", str(out), str(src)], cwd=src.parent)
    (found,) = out.glob("*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> pathlib.Path:
    """A fresh venv with the wheel installed (not editable); returns its bin/."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=venv.parent)
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
          str(wheel)], cwd=venv.parent)
    site = pathlib.Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             cwd=venv.parent).stdout.strip())
    (site / "_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def _user_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PXLA_"))}
    env.update(XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    return env


def test_the_wheel_ships_the_examples_and_the_metadata(wheel):
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    for file in ("__init__.py", *EXAMPLE_FILES):
        assert f"pxla_mlir/examples/{file}" in names
    assert "pxla_mlir/__main__.py" in names
    assert not any(n.startswith("pxla_mlir/examples/goldens/") for n in names)  # the test suite's, not users'
    meta = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    for line in ("Project-URL: Source, https://github.com/pxla-mlir/pxla-mlir", "Author: pxla_mlir developers",
                 "Classifier: Topic :: Software Development :: Compilers", "Classifier: Typing :: Typed",
                 "Provides-Extra: lit", "Summary: A compiler that lowers JAX parallel maps"):
        assert line in meta, line


def test_python_dash_m_pxla_mlir_from_the_wheel(installed, tmp_path):
    proc = _run([str(installed / "python"), "-m", "pxla_mlir", "--version"], cwd=tmp_path, env=_user_env())
    assert proc.stdout.startswith("pxla-mlir ")


def test_examples_from_the_wheel_list_copy_and_run(installed, tmp_path):
    env = _user_env()
    pxla_mlir = str(installed / "pxla-mlir")
    listed = _run([pxla_mlir, "example", "--list"], cwd=tmp_path, env=env).stdout
    assert "train_step" in listed and "run: pxla-mlir run train_step.py:train_step" in listed
    where = _run([pxla_mlir, "example", "per_device_psum", "--path"], cwd=tmp_path, env=env).stdout.strip()
    assert "site-packages" in where and str(REPO) not in where
    # Copied out, the example runs as the copy says.
    wrote = _run([pxla_mlir, "example", "nested_reduction"], cwd=tmp_path, env=env).stdout
    assert wrote.splitlines()[-1] == "run it with: pxla-mlir run nested_reduction.py:two_level_sum"
    ran = _run([pxla_mlir, "run", "nested_reduction.py:two_level_sum", "--calls", "1"], cwd=tmp_path, env=env)
    assert ran.stdout.startswith("ran on 8 CPU devices")
    # --run runs the installed copy: a map on its declared inputs, a module file, and a script.
    ran = _run([pxla_mlir, "example", "xmap_2d", "--run"], cwd=tmp_path, env=env)
    assert "site-packages" in ran.stderr and "xmap_2d.py:normalise_2d" in ran.stderr
    assert ran.stdout.startswith("ran on 8 CPU devices")
    ran = _run([pxla_mlir, "example", "per_device_psum", "--run"], cwd=tmp_path, env=env)
    assert "stacked on a leading device axis" in ran.stdout
    ran = _run([pxla_mlir, "example", "pmap_demo", "--run"], cwd=tmp_path, env=env)
    assert "$ python " in ran.stderr and ran.stdout.strip()
