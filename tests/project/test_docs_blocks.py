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
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO

RUN = {"python", "sh"}
SHOWN = {"console", "text", "mlir"}
FENCE = re.compile(r"^```(?P<lang>[^\n`]*)\n(?P<code>.*?)^```$", re.S | re.M)

PAGES = ["README.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))]
#: Generated pages: their console blocks are the passes' pxla-opt lines, which the lit tests of test/lit/passes/ run.
GENERATED = {"docs/passes.md", "docs/cli.md", "docs/pxla-form.md"}
#: Pages whose blocks start several jax processes: run with the multiprocess tests, serially.
MULTIPROCESS_PAGES = {"docs/multiprocess.md"}


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
@pytest.mark.parametrize("page", [p for p in PAGES if p not in MULTIPROCESS_PAGES])
def test_page_blocks_run(page, tmp_path):
    run_page(page, tmp_path)


@pytest.mark.multiprocess
@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(MULTIPROCESS_PAGES))
def test_multiprocess_page_blocks_run(page, tmp_path):
    run_page(page, tmp_path)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q", "-p", "no:xdist"]))
