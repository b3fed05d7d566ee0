"""Every code block of the README and of docs/ runs as shown, with nothing hidden.

The convention (docs/contributing.md, "The docs' code blocks"):

* ```python and ```sh blocks run, in page order, in one fresh process per
  page, in an empty temporary folder: the python blocks share one namespace
  (a later block may use what an earlier one made) and the sh blocks run in
  bash with ``set -e -o pipefail`` in the same folder (a later command may use
  a file an earlier one wrote). The page's own first blocks set up what it
  needs (``XLA_FLAGS`` for 8 CPU devices before jax is imported); the runner
  removes ``XLA_FLAGS`` and ``JAX_NUM_CPU_DEVICES`` from the environment, so
  a page that forgets fails. It runs with ``JAX_PLATFORMS=cpu`` and the
  environment's ``bin`` folder first on ``PATH`` (``pxla-mlir``, ``lit``), as an
  activated virtual environment has it.
* ```console blocks are shown, not run: commands that cannot run here
  (building the wheel, several hosts, an accelerator). ```text and ```mlir
  blocks are output or excerpts, never commands.

The README runs as a newcomer follows it on a fresh clone, top to bottom in one
bash session whose ``PATH`` has no virtual environment on it: its console steps
(``make demo`` on a copy of the checkout whose ``.venv`` is this environment,
installed already) and its sh blocks in order, the python blocks that follow one
another as one file run by ``python``. So a step that works only in an activated
environment fails unless the README activates it first.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import REPO

RUN = {"python", "sh"}
SHOWN = {"console", "text", "mlir"}
FENCE = re.compile(r"^```(?P<lang>[^\n`]*)\n(?P<code>.*?)^```$", re.S | re.M)

PAGES = ["README.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))]
#: Generated pages: their console blocks are the passes' pxla-opt lines, which the lit tests of test/lit/passes/ run.
GENERATED = {"docs/passes.md", "docs/cli.md", "docs/pxla-form.md", "docs/quickstart.md"}
#: The README's quick starts, cut out for the site: the README's walk-through runs them (one shell session).
README_COPIES = {"docs/quickstart.md"}
#: Pages whose blocks start several jax processes: run with the multiprocess tests, serially.
MULTIPROCESS_PAGES = {"docs/multiprocess.md"}
#: Every command of the README's console blocks: "run" by the newcomer's walk-through, or why it is left out.
WHEEL = "tests/project/test_installed_wheel.py builds the wheel and sdist and installs them"
README_CONSOLE = {
    "make demo": "run",
    "make test": "the whole suite, which runs this test",
    "pip install build": WHEEL,
    "python -m build": WHEEL,
    "pip install dist/pxla_mlir-*.whl": WHEEL,
}


def blocks(page: str) -> list[tuple[str, int, str]]:
    """(language, first line of the code, code) of every fenced block of ``page``."""
    text = (REPO / page).read_text()
    return [(m["lang"].strip(), text.count("\n", 0, m.start("code")) + 1, m["code"]) for m in FENCE.finditer(text)]


def _driver(page: str) -> str:
    runnable = [b for b in blocks(page) if b[0] in RUN]
    return textwrap.dedent("""
        import subprocess
        import sys

        BLOCKS = __BLOCKS__
        namespace = {"__name__": "__main__"}
        for lang, line, code in BLOCKS:
            print(f"=== {__PAGE__}:{line} ({lang})", flush=True)
            if lang == "python":
                exec(compile("\\n" * (line - 1) + code, __PAGE__, "exec"), namespace)
                sys.stdout.flush()
            else:
                done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code])
                if done.returncode:
                    sys.exit(f"{__PAGE__}:{line}: the sh block exited with {done.returncode}")
        print(f"RAN {len(BLOCKS)} BLOCKS")
    """).replace("__BLOCKS__", repr(runnable)).replace("__PAGE__", repr(page))


def run_page(page: str, tmp_path, timeout: int = 600) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    done = subprocess.run([sys.executable, "-c", _driver(page)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=timeout)
    out = done.stdout + done.stderr
    n = sum(1 for b in blocks(page) if b[0] in RUN)
    assert done.returncode == 0 and f"RAN {n} BLOCKS" in done.stdout, out[-6000:]
    return out


def test_every_block_has_a_known_language_and_nothing_is_hidden():
    for page in PAGES:
        text = (REPO / page).read_text()
        assert "<!--" not in text, f"{page}: no HTML comments (no hidden code): every block is shown"
        assert text.count("\n```") % 2 == 0, f"{page}: an unclosed code fence"
        for lang, line, _ in blocks(page):
            assert lang in RUN | SHOWN, f"{page}:{line}: a ```{lang} block: use one of {sorted(RUN | SHOWN)}"
            assert not (lang == "console" and page == "README.md" and line > 80), \
                f"{page}:{line}: the README's quick starts run as shown (console only for the install)"


def test_console_blocks_are_few():
    shown = {page: sum(1 for lang, _, _ in blocks(page) if lang == "console") for page in PAGES
             if page not in GENERATED}
    assert sum(shown.values()) <= 6, f"console blocks are not run: keep them for what cannot run here {shown}"


def test_a_page_that_runs_pytest_installs_it_first():
    """pytest is no dependency of pxla_mlir: a page's commands install it before they run it."""
    pytest_run = re.compile(r"^\s*(?:python -m )?pytest\b", re.M)
    for page in PAGES:
        script = "\n".join(code for lang, _, code in blocks(page) if lang == "sh")
        found = pytest_run.search(script)
        if found:
            assert re.search(r"^\s*pip install\b.*\bpytest\b", script[:found.start()], re.M), \
                f"{page}: runs pytest without installing it first (pip install pytest)"


def test_the_pages_set_up_their_devices_before_jax():
    for page in PAGES:
        python = [code for lang, _, code in blocks(page) if lang == "python"]
        if python:
            first = python[0]
            imports = re.search(r"^(?:import|from) (?:jax|pxla_mlir)\b", first, re.M)
            assert 'os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"' in first and \
                (imports is None or first.index("XLA_FLAGS") < imports.start()), \
                f"{page}: the first python block sets XLA_FLAGS before importing jax or pxla_mlir"


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if p not in MULTIPROCESS_PAGES | README_COPIES | {"README.md"}])
def test_page_blocks_run(page, tmp_path):
    run_page(page, tmp_path)


def newcomer_session(page: str = "README.md") -> tuple[str, dict[str, str]]:
    """``page`` as one bash script, as a newcomer types it, and the python files it runs (name: code)."""
    script, files, python = ["set -e -o pipefail"], {}, []

    def run_python():
        if python:
            name = f"readme_python_{len(files) + 1}.py"
            files[name] = "".join(python)
            script.append(f"python {name}")
            python.clear()

    for lang, line, code in blocks(page):
        if lang == "python":
            python.append("\n" * (line - 1 - sum(c.count("\n") for c in python)) + code)
            continue
        run_python()
        if lang == "sh":
            script += [f"echo '=== {page}:{line} (sh)'", code]
        elif lang == "console":
            for command in (l.split("#")[0].strip() for l in code.splitlines()):
                assert not command or command in README_CONSOLE, \
                    f"{page}:{line}: {command!r}: add it to README_CONSOLE (run, or why the walk-through leaves it out)"
                if command and README_CONSOLE[command] == "run":
                    script += [f"echo '=== {page}:{line} (console) {command}'", command]
    run_python()
    return "\n".join(script) + "\n", files


def fresh_clone(tmp_path) -> pathlib.Path:
    """What ``make demo`` needs of a clone, with this environment as its ``.venv`` (stamped as installed, so make
    runs the demo without installing; the Makefile's recipes are tests/project/test_makefile.py's)."""
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(REPO / name, clone / name)
    (clone / "examples").symlink_to(REPO / "examples")
    venv = clone / ".venv"
    venv.mkdir()
    for entry in pathlib.Path(sys.prefix).iterdir():
        if not entry.name.startswith("."):
            (venv / entry.name).symlink_to(entry)
    later = time.time() + 5
    for stamp in (".created", ".installed-runtime"):
        (venv / stamp).touch()
        os.utime(venv / stamp, (later, later))
    return clone


@pytest.mark.subprocess
@pytest.mark.slow
def test_readme_runs_as_a_newcomer_follows_it(tmp_path):
    if sys.prefix == sys.base_prefix or shutil.which("make") is None:
        pytest.skip("the walk-through lends the clone this virtual environment, and runs make")
    script, files = newcomer_session()
    clone = fresh_clone(tmp_path)
    for name, code in files.items():
        (clone / name).write_text(code)
    venv_bins = {os.path.dirname(sys.executable), os.path.join(sys.prefix, "bin")}
    shell_path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and os.path.realpath(d) not in
                  {os.path.realpath(b) for b in venv_bins}]
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES", "VIRTUAL_ENV",
                                                             "PYTHONPATH", "MAKEFLAGS", "MAKELEVEL")}
    env.update(PATH=os.pathsep.join(shell_path), JAX_PLATFORMS="cpu")
    done = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True, timeout=900)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    assert "=== match: True" in done.stdout and "Passed: 1" in done.stdout, out[-6000:]


def test_the_newcomer_session_fails_without_the_activation():
    """The walk-through's point: without `source .venv/bin/activate`, the first python or pxla-mlir after make demo
    is the shell's (no jax, no such command)."""
    script, _ = newcomer_session()
    lines = script.splitlines()
    activation = lines.index("source .venv/bin/activate")
    demo = lines.index("make demo")
    first_use = min(i for i, l in enumerate(lines) if l.startswith(("python ", "pxla-mlir ", "pxla-opt ", "lit ")))
    assert demo < activation < first_use


@pytest.mark.multiprocess
@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(MULTIPROCESS_PAGES))
def test_multiprocess_page_blocks_run(page, tmp_path):
    run_page(page, tmp_path)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:xdist"]))
