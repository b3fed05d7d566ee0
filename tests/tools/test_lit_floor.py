"""The lit extra's floor is a lit that update-checks works with: the lowest release the extra allows,
installed beside this environment, rewrites a generated block and lit itself then passes the test.
(lit_runs reaches into lit's internals, whose signatures change between releases: lit 23 renamed
LitConfig's quiet to diagnostic_level.)"""

import os
import re
import subprocess
import sys
import textwrap
import tomllib

import pytest
from conftest import REPO

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

TEST = textwrap.dedent("""\
    // RUN: pxla-opt %s | filecheck %s
    // CHECK-GEN-BEGIN
    // CHECK-GEN-END
    module {
      func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
        return %arg0 : tensor<2xf32>
      }
    }
    """)
SUITE = textwrap.dedent("""\
    import os, sys
    import lit.formats
    from pxla_mlir.tools.lit_runs import pxla_substitutions
    config.name = "floor"
    config.test_format = lit.formats.ShTest(execute_external=False)
    config.suffixes = [".mlir"]
    config.environment["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), config.environment["PATH"]])
    config.substitutions += pxla_substitutions(sys.executable)
    """)


def extras() -> dict[str, list[str]]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def lit_floor() -> str:
    (spec,) = [s for s in extras()["lit"] if s.startswith("lit")]
    m = re.fullmatch(r"lit>=([\d.]+)", spec)
    assert m, f"the lit extra gives lit a floor (lit>=X.Y.Z), got {spec!r}"
    return m[1]


def as_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def test_the_floor_is_the_one_update_checks_checks():
    from pxla_mlir.tools.lit_runs import LIT_FLOOR

    assert as_tuple(lit_floor()) == LIT_FLOOR


def test_an_older_lit_is_refused_in_one_line_that_says_how_to_upgrade(monkeypatch):
    import lit

    from pxla_mlir.tools.lit_runs import RunError, load_test

    monkeypatch.setattr(lit, "__version__", "17.0.6")
    with pytest.raises(RunError, match=r"^update-checks needs lit 18\.1\.1 or later .*found lit 17\.0\.6 at .*: "
                                       r"pip install --upgrade 'pxla-mlir\[lit\]'$"):
        load_test(str(REPO / "test" / "lit" / "goldens" / "handoff_pipeline.mlir"))


def test_the_test_extra_pins_a_lit_above_the_floor():
    (pin,) = [s for s in extras()["test"] if s.startswith("lit==")]
    assert as_tuple(pin.removeprefix("lit==")) >= as_tuple(lit_floor())


def test_update_checks_works_on_the_lowest_lit_the_extra_allows(tmp_path):
    floor = lit_floor()
    target = tmp_path / "lit-floor"
    got = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                          f"lit=={floor}"], capture_output=True, text=True, timeout=300)
    if got.returncode:
        pytest.skip(f"pip cannot fetch lit=={floor} here (offline?): {got.stderr.strip()[-300:]}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "lit.cfg.py").write_text(SUITE)
    test = suite / "identity.mlir"
    test.write_text(TEST)

    def run(*argv):
        done = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert run("-c", "import lit; print(lit.__version__)").strip() == floor
    assert run("-m", "pxla_mlir.tools.cli", "update-checks", str(test)).strip() == f"updated {test}"
    assert "// CHECK-NEXT:      return %[[ARG0]] : tensor<2xf32>" in test.read_text()
    run("-m", "pxla_mlir.tools.cli", "update-checks", "--check", str(test))  # current now
    assert "Passed: 1" in run("-c", "import lit.main; lit.main.main()", "-v", str(test))
