"""make demo installs what the demo runs on (the package and its runtime dependencies), says what it installs,
and needs nothing more; make test installs the test toolchain even after a make demo (separate stamps).
The recipes are read with ``make -n`` in a copy of the Makefile: nothing is installed."""

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import tomllib
from importlib import metadata
from importlib.metadata import packages_distributions

import pytest
from conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


@pytest.fixture
def checkout(tmp_path):
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(REPO / name, tmp_path / name)
    return tmp_path


def recipe(checkout, target) -> list[str]:
    """The commands ``make TARGET`` would run, in order."""
    done = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(checkout), target], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def installs(lines) -> list[str]:
    return [line for line in lines if re.search(r"\bpip install\b", line) and "--upgrade pip" not in line]


def stamp(checkout, *names):
    """What a finished install leaves: the stamps, newer than pyproject.toml."""
    (checkout / ".venv").mkdir(exist_ok=True)
    later = time.time() + 5
    for name in names:
        (checkout / ".venv" / name).touch()
        os.utime(checkout / ".venv" / name, (later, later))


@pytest.mark.subprocess  # make -n
def test_demo_on_a_fresh_checkout_installs_the_runtime_only_and_says_so(checkout):
    lines = recipe(checkout, "demo")
    (install,) = installs(lines)
    assert install.endswith("pip install --quiet -e ."), install
    said = [line for line in lines[:lines.index(install)] if line.startswith("echo ")]
    assert any("jax, jaxlib, numpy, rich" in line for line in said), lines
    assert lines[-1].startswith("echo ") and "source .venv/bin/activate" in lines[-1], lines[-1]


@pytest.mark.subprocess  # make -n
def test_make_test_after_make_demo_installs_the_test_extra(checkout):
    stamp(checkout, ".created", ".installed-runtime")
    assert not installs(recipe(checkout, "demo")), "a second make demo installs nothing"
    lines = recipe(checkout, "test")
    (install,) = installs(lines)
    assert install.endswith("pip install --quiet -e '.[test]'"), install
    said = lines[lines.index(install) - 1]
    assert said.startswith("echo ") and "about 1 GB" in said, said


@pytest.mark.subprocess  # make -n
def test_make_demo_after_make_test_installs_nothing(checkout):
    stamp(checkout, ".created", ".installed-runtime", ".installed")
    assert not installs(recipe(checkout, "demo"))
    assert not installs(recipe(checkout, "test-fast"))


def _test_only_modules() -> set[str]:
    """Top-level modules of the test extra's direct requirements that the runtime requirements do not bring
    (directly or through their own: the test extra may pin one of jax's, as it does ml_dtypes)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    name = re.compile(r"^[A-Za-z0-9_.-]+")
    norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()  # noqa: E731
    runtime = {norm(name.match(spec)[0]) for spec in project["dependencies"]} | {norm(project["name"])}
    pending = list(runtime - {norm(project["name"])})
    while pending:
        for spec in metadata.requires(pending.pop()) or []:
            if "extra ==" not in spec and (dist := norm(name.match(spec)[0])) not in runtime:
                runtime.add(dist)
                pending.append(dist)
    extras = project["optional-dependencies"]
    test_only = {norm(name.match(spec)[0]) for spec in extras["test"] + extras["docs"]} - runtime
    return {module for module, dists in packages_distributions().items()
            if any(norm(d) in test_only for d in dists) and not module.startswith("_")}


@pytest.mark.subprocess
@pytest.mark.slow
def test_the_demo_imports_nothing_from_the_test_extra():
    forbidden = _test_only_modules()
    assert {"pytest", "lit", "mkdocs"} <= forbidden
    guard = textwrap.dedent(f"""\
        import runpy, sys
        FORBIDDEN = {sorted(forbidden)!r}

        class Guard:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in FORBIDDEN:
                    raise ImportError(f"the demo imported {{name}}, which only the test extra installs")

        sys.meta_path.insert(0, Guard())
        sys.argv = [{str(REPO / "examples" / "pmap_demo.py")!r}]
        runpy.run_path(sys.argv[0], run_name="__main__")
        """)
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    done = subprocess.run([sys.executable, "-c", guard], capture_output=True, text=True, env=env, timeout=600,
                          cwd=REPO)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "=== match: True" in done.stdout


def _rules() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*)\s*:(?!=)", (REPO / "Makefile").read_text(), re.M))


def test_every_target_named_has_a_rule():
    """No phantom targets: each .PHONY entry, and each ``make TARGET`` the README, the docs, the Makefile's
    comments, CI or the sources name (in backquotes or at the start of a line or comment), has a rule."""
    rules = _rules()
    assert {"demo", "test", "test-fast", "lint", "docs"} <= rules, rules
    (phony,) = re.findall(r"^\.PHONY:(.*)$", (REPO / "Makefile").read_text(), re.M)
    missing = [f"Makefile: .PHONY {name}" for name in phony.split() if name not in rules]
    texts = [REPO / name for name in ("README.md", "Makefile", ".ci/run", "pyproject.toml", "noxfile.py",
                                      ".pre-commit-config.yaml")]
    texts += [p for folder in ("docs", "pxla_mlir", "passes", "tests", "bench", "examples")
              for p in sorted((REPO / folder).rglob("*")) if p.suffix in (".md", ".py")]
    for path in texts:
        for name in re.findall(r"(?:`|^[ \t#]*)make ([a-z][\w-]*)", path.read_text(), re.M):
            if name not in rules:
                missing.append(f"{path.relative_to(REPO)}: make {name}")
    assert not missing, "targets without a rule:\n" + "\n".join(missing)


def test_nox_sessions_spread_the_tests_as_make_test_does():
    """make test-versions' whole suites run as make test's: the same xdist flags, multi-process tests apart."""
    (make_flags,) = re.findall(r"^XDIST \?= (.*)$", (REPO / "Makefile").read_text(), re.M)
    (nox_flags,) = re.findall(r"^XDIST = \((.*)\)$", (REPO / "noxfile.py").read_text(), re.M)
    assert re.findall(r'"([^"]+)"', nox_flags) == make_flags.split()
    full = (REPO / "noxfile.py").read_text().split("def _full(", 1)[1].split("\ndef ", 1)[0]
    assert '"-m", "not multiprocess"' in full and '"-m", "multiprocess"' in full, full
