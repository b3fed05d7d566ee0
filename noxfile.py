"""The test matrix: the suite on each jax release pxla_mlir supports.

``make test`` runs everything on the newest jax the machine's ``python3``
allows; these sessions add the other releases, each in its own virtual
environment (uv's when uv is installed, else the standard library's)::

    nox -l                      # the sessions
    nox -t ci                   # what CI runs beside make test
    nox -s "full(jax='0.12.0.1')"

Interpreters are found where they are: ``pythonX.Y`` on PATH (when it runs),
then pyenv's versions. A missing one is a skip line naming what was not
tested, never a silent pass.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

import nox

nox.options.download_python = "never"  # only interpreters this machine has
nox.options.default_venv_backend = "uv|venv"
nox.options.sessions = []  # nothing by default: name a session or a tag

#: jax release -> the Python it is tested with (jax 0.11 dropped Python 3.11); smoke-jax-0.12-py3.13 adds 3.13.
PYTHONS = {"0.10.2": "3.11", "0.11.2": "3.12", "0.12.0.1": "3.12"}

#: The smoke subset: flat and nested pmap, xmap, jit, run, emit, jax's library under pmap (what it binds changes
#: with the release) (and the lit suite).
SMOKE = ["tests/pmaps/test_pmap_api.py", "tests/pmaps/test_pmap_numerics.py", "tests/pmaps/test_nested_pieces.py",
         "tests/xmaps/test_xmap_api.py", "tests/xmaps/test_xmap_numerics.py", "tests/pmaps/test_pmap_under_jit.py",
         "tests/tools/test_run_module.py", "tests/tools/test_cli_emit.py", "tests/jaxbridge/test_jax_versions.py",
         "tests/pmaps/test_jax_library.py"]


def find_python(version: str) -> str | None:
    """The path of a working ``python<version>``: PATH first, then pyenv's
    versions (whose PATH shim refuses a version not selected)."""
    candidates = [shutil.which(f"python{version}")]
    root = os.environ.get("PYENV_ROOT") or _pyenv_root()
    if root:
        candidates += sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}")),
                         reverse=True)
    for path in filter(None, candidates):
        try:
            out = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == version:
            return path
    return None


def _pyenv_root() -> str | None:
    if shutil.which("pyenv") is None:
        return None
    out = subprocess.run(["pyenv", "root"], capture_output=True, text=True)
    return out.stdout.strip() or None


def _install(session: nox.Session, jax: str, python: str | None = None) -> None:
    python = python or PYTHONS[jax]
    if find_python(python) is None:
        session.skip(f"Python {python} not found (PATH, pyenv versions): the suite did NOT run on jax {jax}")
    session.install("-e", ".[test]", f"jax=={jax}", f"jaxlib=={jax}")
    session.run("python", "-c", "import jax, sys; print('jax', jax.__version__, 'on Python', sys.version.split()[0])")


def _lit(session: nox.Session) -> None:
    """The lit suite, each RUN line's output checked under the PyPI filecheck and LLVM's FileCheck (as make test)."""
    llvm = sorted(glob.glob("/usr/lib/llvm-*/bin/FileCheck"))
    if llvm:
        session.run("lit", "-s", "test/lit", f"-DFILECHECK=filecheck{os.pathsep}{llvm[-1]}")
    else:
        session.run("lit", "-s", "test/lit")
        session.log("LLVM FileCheck not found: lit ran with the PyPI filecheck only")


def _session(jax: str, python: str | None = None, **kwargs):
    python = python or PYTHONS[jax]
    path = find_python(python)
    return nox.session(python=path or python, venv_backend=None if path else "none", **kwargs)


@nox.session(venv_backend="none")
def pythons(session: nox.Session) -> None:
    """Which interpreter each jax release would be tested with."""
    for jax, python in PYTHONS.items():
        session.log(f"jax {jax}: Python {python} at {find_python(python) or 'NOT FOUND'}")


#: As make test (the Makefile's XDIST): the tests spread over the cores in their groups, then the multi-process
#: launches alone, which fill the cores themselves and hold deadlines that competing workers would break.
XDIST = ("-n", "auto", "--maxprocesses", "8", "--dist", "loadgroup")


def _full(session: nox.Session, jax: str) -> None:
    _install(session, jax)
    session.run("python", "-m", "pytest", "-q", *XDIST, "-m", "not multiprocess", "tests", *session.posargs)
    session.run("python", "-m", "pytest", "-q", "-m", "multiprocess", "tests", *session.posargs)
    _lit(session)


def _smoke(session: nox.Session, jax: str, python: str | None = None) -> None:
    _install(session, jax, python)
    session.run("python", "-m", "pytest", "-q", *SMOKE, *session.posargs)
    _lit(session)


@_session("0.12.0.1", name="full-jax-0.12", tags=["ci"])
def full_012(session: nox.Session) -> None:
    """The whole suite on jax 0.12.0.1 (Python 3.12)."""
    _full(session, "0.12.0.1")


@_session("0.10.2", name="full-jax-0.10")
def full_010(session: nox.Session) -> None:
    """The whole suite on jax 0.10.2 (Python 3.11): what make test runs on a Python 3.11 machine."""
    _full(session, "0.10.2")


@_session("0.11.2", name="full-jax-0.11", tags=["ci"])
def full_011(session: nox.Session) -> None:
    """The whole suite on jax 0.11.2 (Python 3.12): its private protocols differ from both neighbours'."""
    _full(session, "0.11.2")


@_session("0.11.2", name="smoke-jax-0.11")
def smoke_011(session: nox.Session) -> None:
    """The smoke subset on jax 0.11.2 (Python 3.12)."""
    _smoke(session, "0.11.2")


@_session("0.12.0.1", "3.13", name="smoke-jax-0.12-py3.13", tags=["ci"])
def smoke_012_py313(session: nox.Session) -> None:
    """The smoke subset on jax 0.12.0.1 under Python 3.13."""
    _smoke(session, "0.12.0.1", "3.13")
