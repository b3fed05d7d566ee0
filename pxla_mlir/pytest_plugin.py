"""Golden files for MHLO under pytest (loaded automatically once pxla-mlir
is installed).

    def test_my_pmap(pxla_golden):
        pxla_golden.check("my_pmap.mlir", pxla_mlir.pmap(f).lower(x).as_text())

The golden lives in ``goldens/`` next to the test file (or ``pxla_golden.at(dir)``).
A mismatch fails with an MLIR-aware diff; ``pytest --pxla-update-goldens``
rewrites the files instead.

FileCheck goldens hold CHECK lines instead of the whole text:

    def test_my_pmap_checks(pxla_golden):
        pxla_golden.filecheck("my_pmap.checks.mlir", text)

The text must pass FileCheck (``$FILECHECK``, else ``filecheck``, else
``FileCheck`` on PATH) with the golden's lines. ``--pxla-update-goldens``
rewrites only its generated block (``pxla-mlir gen-checks`` lines between the
``CHECK-GEN-BEGIN``/``CHECK-GEN-END`` markers) and keeps hand-written lines
outside it.

Virtual CPU devices: ``pytest --pxla-cpu-devices 8`` (or ``pxla_cpu_devices = 8``
in the ini file) sets jax's ``jax_num_cpu_devices`` before any test runs, so
tests of multi-device maps need no ``XLA_FLAGS`` in the shell; the option
wins over ``XLA_FLAGS`` and ``JAX_NUM_CPU_DEVICES``, as ``pxla-mlir
--cpu-devices`` does.

Every name the plugin adds to pytest starts with ``pxla``: other plugins (pytest-golden has
``--update-goldens`` and a ``golden`` fixture) register the plain names, and pytest refuses a
second plugin's option of the same name for every run.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from pxla_mlir.mlir.support.files import write_atomically

UPDATE_GOLDENS = "--pxla-update-goldens"
CPU_DEVICES = "--pxla-cpu-devices"
CPU_DEVICES_INI = "pxla_cpu_devices"


def pytest_addoption(parser):
    group = parser.getgroup("pxla-mlir", "pxla-mlir (golden MHLO files, virtual CPU devices)")
    group.addoption(UPDATE_GOLDENS, action="store_true", default=False,
                    help="rewrite the golden files of the pxla_golden fixture instead of comparing")
    help_devices = "virtual CPU devices jax starts with (jax_num_cpu_devices; wins over XLA_FLAGS)"
    group.addoption(CPU_DEVICES, type=int, default=None, metavar="N", help=help_devices)
    parser.addini(CPU_DEVICES_INI, help=f"{help_devices}; {CPU_DEVICES} overrides it", default="")


def pytest_configure(config):
    count = _cpu_devices(config)
    if count is None:
        return
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError as e:  # jax started its backends already (a conftest or plugin ran jax)
        raise pytest.UsageError(f"{CPU_DEVICES} {count}: jax has started its CPU backend already, so its device "
                                f"count is fixed: a conftest.py or plugin ran jax at import time. Move that jax "
                                f"work into a fixture, or set the count there before it runs "
                                f"(jax.config.update('jax_num_cpu_devices', {count})). jax said: {e}") from None


def _cpu_devices(config) -> int | None:
    given = config.getoption(CPU_DEVICES)
    source = CPU_DEVICES
    if given is None:
        text = str(config.getini(CPU_DEVICES_INI) or "").strip()
        if not text:
            return None
        source = f"the ini setting {CPU_DEVICES_INI} = {text}"
        try:
            given = int(text)
        except ValueError:
            raise pytest.UsageError(f"{source}: expected a positive number of devices") from None
    if given < 1:
        raise pytest.UsageError(f"{source} {given}: expected a positive number of devices")
    return given


def jax_release_dir() -> str:
    """``jax-0.12`` for jax 0.12.x: the folder of goldens for that release."""
    from importlib.metadata import version

    return "jax-" + ".".join(version("jax").split(".")[:2])


class Golden:
    """Golden files in ``directory``. jax's own lowering of a program can
    change between releases: ``directory/jax-0.12/NAME``, where it exists,
    is NAME's golden under jax 0.12.x (``--pxla-update-goldens`` rewrites the file
    a check reads; make the folder by hand to start one)."""

    def __init__(self, directory: pathlib.Path, update: bool):
        self.directory, self.update = pathlib.Path(directory), update

    def at(self, directory) -> Golden:
        return Golden(directory, self.update)

    def path(self, name: str) -> pathlib.Path:
        """The golden ``name`` of the installed jax release."""
        versioned = self.directory / jax_release_dir() / name
        return versioned if versioned.exists() else self.directory / name

    def check(self, name: str, text: str, *, ignore=()) -> None:
        path = self.path(name)
        if self.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, text)
            return
        if not path.exists():
            pytest.fail(f"golden file {path} does not exist; create it with pytest --pxla-update-goldens", pytrace=False)
        from pxla_mlir.mlir.core.mlir_diff import diff

        expected = path.read_text()
        if name.endswith(".mlir"):
            delta = diff(expected, text, a_name=str(path), b_name="emitted", ignore=ignore)
        else:
            delta = "" if expected == text else f"{path} differs from the emitted text"
        if delta:
            pytest.fail(f"emitted MHLO differs from the golden file:\n{delta}\n"
                        f"(if the change is intended: pytest --pxla-update-goldens)", pytrace=False)


    def filecheck(self, name: str, text: str, *, prefix: str = "CHECK") -> None:
        """``text`` passes FileCheck with the lines of the golden ``name`` (``prefix`` selects them)."""
        from pxla_mlir.mlir.cli.gen_checks import MarkerError, check_lines, with_block

        path = self.path(name)
        if self.update:
            try:
                new = with_block(path.read_text() if path.exists() else "", check_lines(text, prefix))
            except MarkerError as e:
                pytest.fail(f"{path}:{e.line}: {e}", pytrace=False)
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(path, new)
        elif not path.exists():
            pytest.fail(f"golden file {path} does not exist; create it with pytest --pxla-update-goldens", pytrace=False)
        failure = _filecheck(path, text, prefix)
        if failure:
            hint = ("its hand-written lines do not fit the regenerated block" if self.update
                    else "if the change is intended: pytest --pxla-update-goldens")
            pytest.fail(f"emitted text does not pass the FileCheck golden {path}:\n{failure}\n({hint})",
                        pytrace=False)


def _filecheck_command() -> list[str]:
    chosen = os.environ.get("FILECHECK")
    found = chosen or shutil.which("filecheck", path=os.path.dirname(sys.executable)) or \
        shutil.which("filecheck") or shutil.which("FileCheck")
    if not found:
        pytest.fail("pxla_golden.filecheck needs a FileCheck: pip install filecheck, or set FILECHECK=/path/to/FileCheck",
                    pytrace=False)
    return [found]


def _filecheck(path: pathlib.Path, text: str, prefix: str) -> str:
    """FileCheck's complaint about ``text`` against the checks in ``path`` ("" if it passes)."""
    done = subprocess.run(_filecheck_command() + [str(path), f"--check-prefix={prefix}"], input=text,
                          capture_output=True, text=True, timeout=300)
    return "" if done.returncode == 0 else (done.stderr.strip() or f"FileCheck exited {done.returncode}")


@pytest.fixture
def pxla_golden(request) -> Golden:
    """Golden files in ``goldens/`` beside the test file (see the module's docstring)."""
    return Golden(request.path.parent / "goldens", request.config.getoption(UPDATE_GOLDENS))
