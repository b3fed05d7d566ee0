"""The package as users get it: the built wheel, installed non-editable in a
fresh virtual environment, used from a directory outside the repository.

Every other test imports the editable checkout, which hides packaging bugs
(a package missing from the wheel, a data file not shipped). The fresh venv
gets pxla_mlir from the wheel only; its dependencies (jax, jaxlib, numpy,
rich) come from the test environment's site-packages through a ``.pth``
file, so the test downloads nothing.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

import pytest
from conftest import REPO

# The module fixtures build the wheel and a venv once: under pytest-xdist one worker runs the whole file.
pytestmark = [pytest.mark.subprocess, pytest.mark.xdist_group("installed_wheel")]


#: The examples the wheel ships as pxla_mlir.examples (pxla-mlir example).
EXAMPLE_FILES = ("pmap_demo.py", "train_step.py", "nested_reduction.py", "xmap_2d.py", "per_device_psum.mlir",
                 "plugins/__init__.py", "plugins/collective_bytes.py",
                 "plugins/unshard_as_all_gather.py")


def _run(argv, *, cwd, env=None, timeout=300) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(map(str, argv))} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n" \
                                 f"{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, pathlib.Path]:
    """The wheel and the sdist, built from the checkout without network."""
    out = tmp_path_factory.mktemp("dist")
    work = tmp_path_factory.mktemp("srccopy")
    # Build from a clean copy so no build/ or egg-info of the checkout leaks in.
    src = work / "src"
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info",
                                                             "__pycache__", "Output", ".pytest_cache"))
    _run([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--sdist", "--outdir", str(out), str(src)],
         cwd=work)
    (wheel,), (sdist,) = out.glob("*.whl"), out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def _source_modules() -> set[str]:
    names = set()
    for path in (REPO / "pxla_mlir").rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".css", ".js", ".typed"):
            names.add(str(path.relative_to(REPO)))
    for path in (REPO / "passes").glob("*.py"):
        names.add(f"pxla_mlir/passes/{path.name}")
    return names


def test_wheel_holds_every_module_license_and_marker(dists):
    names = set(zipfile.ZipFile(dists["wheel"]).namelist())
    missing = sorted(_source_modules() - names)
    assert not missing, f"the wheel lacks {missing[:10]}"
    assert "pxla_mlir/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), sorted(names)[-10:]
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(dists["wheel"]).read(meta).decode()
    assert "License-Expression: Apache-2.0" in text
    assert not any(n.startswith(("tests/", "passes/", "examples/")) for n in names)


def test_sdist_holds_what_its_tests_need(dists):
    with tarfile.open(dists["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in ("LICENSE", "Makefile", "README.md", "CHANGELOG.md", "mkdocs.yml", "docs/assets/iframe-worker/shim.js",
                   "setup.py", "pyproject.toml", "tests/conftest.py",
                   "tests/project/test_installed_wheel.py", "test/lit/lit.cfg.py", "examples/nested_reduction.py",
                   "passes/expand_shard.py", "pxla_mlir/py.typed"):
        assert needed in names, f"the sdist lacks {needed}"
    assert not any("__pycache__" in n for n in names)


@pytest.fixture(scope="module")
def installed(dists, tmp_path_factory) -> pathlib.Path:
    """A fresh venv with the wheel installed (not editable); returns its bin/."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=venv.parent)
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
          str(dists["wheel"])], cwd=venv.parent)
    site = pathlib.Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             cwd=venv.parent).stdout.strip())
    (site / "_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def _user_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PXLA_"))}
    env.update(XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    return env


_PROGRAM = """
import numpy as np, jax, jax.numpy as jnp
from jax import lax
import pxla_mlir

assert "site-packages" in pxla_mlir.__file__ and {repo!r} not in pxla_mlir.__file__, pxla_mlir.__file__
x = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)

y = pxla_mlir.pmap(lambda v: lax.psum(v, "i"), "i")(x)
np.testing.assert_array_equal(np.asarray(y), np.broadcast_to(x.sum(0), (8, 3)))

with pxla_mlir.Mesh.create({{"d": 4}}):
    z = pxla_mlir.xmap(lambda v: v - lax.pmean(v, "b"), ["b", ...], ["b", ...], axis_resources={{"b": "d"}})(x)
np.testing.assert_allclose(np.asarray(z), x - x.mean(0), rtol=1e-6)

g = jax.grad(lambda w: pxla_mlir.pmap(lambda v: jnp.sum(v * v), "i")(w).sum())(x)
np.testing.assert_allclose(np.asarray(g), 2 * x, rtol=1e-6)

nested = pxla_mlir.pmap(lambda b: pxla_mlir.pmap(lambda v: lax.psum(v, ("i", "j")), "j")(b), "i")
np.testing.assert_array_equal(np.asarray(nested(x.reshape(2, 4, 3))), np.broadcast_to(x.sum(0), (2, 4, 3)))
from pxla_mlir.version import source_digest
assert source_digest()[1] == "RECORD", source_digest()  # an installed wheel's code is told by its RECORD
print("installed package works:", pxla_mlir.__file__)
"""


@pytest.mark.slow
def test_installed_wheel_runs_maps_from_outside_the_repo(installed, tmp_path):
    script = tmp_path / "user_program.py"
    script.write_text(_PROGRAM.format(repo=str(REPO)))
    proc = _run([str(installed / "python"), str(script)], cwd=tmp_path, env=_user_env())
    assert "installed package works" in proc.stdout


@pytest.mark.slow
def test_installed_cli_emits_and_opt_runs(installed, tmp_path):
    shutil.copy(REPO / "examples" / "nested_reduction.py", tmp_path / "nested_reduction.py")
    proc = _run([str(installed / "pxla-mlir"), "emit", "nested_reduction.py:two_level_sum"], cwd=tmp_path,
                env=_user_env())
    assert "mhlo.num_replicas = 8" in proc.stdout and "mhlo.all_gather" in proc.stdout, proc.stdout[:2000]
    (tmp_path / "out.mlir").write_text(proc.stdout)
    proc = _run([str(installed / "pxla-opt"), "out.mlir", "--pass-pipeline=builtin.module(pxla-verify-handoff)"],
                cwd=tmp_path, env=_user_env())
    assert "func.func public @main" in proc.stdout
    proc = _run([str(installed / "pxla-mlir"), "passes"], cwd=tmp_path, env=_user_env())
    assert "pxla-expand-shard" in proc.stdout
    # A module from a file runs, here a per-device one (pxla-add-device-axis from the installed passes).
    shutil.copy(REPO / "examples" / "per_device_psum.mlir", tmp_path / "per_device.mlir")
    proc = _run([str(installed / "pxla-mlir"), "run", "per_device.mlir", "-o", "out"], cwd=tmp_path, env=_user_env())
    assert "stacked on a leading device axis" in proc.stderr, proc.stderr  # what ran: stderr; results: stdout
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["0.npy", "1.npy"]


# -- the command line the wheel installs: python -m pxla_mlir, its metadata, the examples it ships --------

def test_the_wheel_ships_the_examples_and_the_metadata(dists):
    archive = zipfile.ZipFile(dists["wheel"])
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
    assert ran.stderr.startswith("ran on 8 CPU devices") and "steady-state call" in ran.stdout
    # --run runs the installed copy: a map on its declared inputs, a module file, and a script.
    ran = _run([pxla_mlir, "example", "xmap_2d", "--run"], cwd=tmp_path, env=env)
    assert "site-packages" in ran.stderr and "xmap_2d.py:normalise_2d" in ran.stderr
    assert "ran on 8 CPU devices" in ran.stderr and "output: float32[" in ran.stdout
    ran = _run([pxla_mlir, "example", "per_device_psum", "--run"], cwd=tmp_path, env=env)
    assert "stacked on a leading device axis" in ran.stderr
    ran = _run([pxla_mlir, "example", "pmap_demo", "--run"], cwd=tmp_path, env=env)
    assert "$ python " in ran.stderr and ran.stdout.strip()
