"""Golden files for MHLO under pytest (loaded automatically once pxla-mlir
is installed).

    def test_my_pmap(golden):
        golden.check("my_pmap.mlir", pxla_mlir.pmap(f).lower(x).as_text())

The golden lives in ``goldens/`` next to the test file (or ``golden.at(dir)``).
A mismatch fails with an MLIR-aware diff; ``pytest --update-goldens``
rewrites the files instead.
"""

from __future__ import annotations

import pathlib

import pytest


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite golden files (pxla_mlir golden fixture) instead of comparing")


class Golden:
    def __init__(self, directory: pathlib.Path, update: bool):
        self.directory, self.update = pathlib.Path(directory), update

    def at(self, directory) -> "Golden":
        return Golden(directory, self.update)

    def check(self, name: str, text: str, *, ignore=()) -> None:
        path = self.directory / name
        if self.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        if not path.exists():
            pytest.fail(f"golden file {path} does not exist; create it with pytest --update-goldens", pytrace=False)
        from .ir.mlir_diff import diff

        expected = path.read_text()
        if name.endswith(".mlir"):
            delta = diff(expected, text, a_name=str(path), b_name="emitted", ignore=ignore)
        else:
            delta = "" if expected == text else f"{path} differs from the emitted text"
        if delta:
            pytest.fail(f"emitted MHLO differs from the golden file:\n{delta}\n"
                        f"(if the change is intended: pytest --update-goldens)", pytrace=False)


@pytest.fixture
def golden(request) -> Golden:
    return Golden(pathlib.Path(str(request.fspath)).parent / "goldens", request.config.getoption("--update-goldens"))
