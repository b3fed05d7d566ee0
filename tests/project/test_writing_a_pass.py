"""docs/writing-a-pass.md's pass and lit tests are real: the files its sh blocks write (``cat > FILE <<'EOF'``)
are cut out and run here, quicker than the whole page (tests/project/test_docs_blocks.py runs it all)."""

import os
import re
import subprocess
import sys

import pytest
from conftest import REPO

from pxla_mlir.mlir.cli import pxla_opt
from pxla_mlir.mlir.pass_infra.registry import REGISTRY

HEREDOC = re.compile(r"^cat > (?P<path>\S+) <<'EOF'\n(?P<text>.*?)^EOF$", re.S | re.M)


def page_files() -> dict[str, str]:
    return {m["path"]: m["text"] for m in HEREDOC.finditer((REPO / "docs" / "writing-a-pass.md").read_text())}


@pytest.fixture
def written(tmp_path):
    files = page_files()
    assert {"donate_arguments.py", "lit/lit.cfg.py", "lit/donate_arguments.mlir",
            "lit/donate_arguments_errors.mlir", "lit/donate_generated.mlir"} <= set(files)
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    with REGISTRY.restored_after():  # the registry as it was: the next test loads its own plugins
        yield tmp_path


def test_the_pages_pass_rewrites_and_reports(written, capsys):
    plugin, test = written / "donate_arguments.py", written / "lit" / "donate_arguments.mlir"
    assert pxla_opt.main([str(test), f"--load-pass-plugin={plugin}", "-donate-arguments=args=0,2"]) == 0
    out = capsys.readouterr().out
    assert "%arg0: tensor<3xf32> {jax.buffer_donor = true}" in out and out.count("jax.buffer_donor") == 2
    errors = written / "lit" / "donate_arguments_errors.mlir"
    argv = [str(errors), f"--load-pass-plugin={plugin}", "-donate-arguments=args=1", "--split-input-file",
            "--verify-diagnostics"]
    assert pxla_opt.main(argv) == 0, capsys.readouterr().err
    assert REGISTRY.load("donate-arguments").version == "1"


BIN = os.path.dirname(sys.executable)


def _outside_the_environment() -> dict[str, str]:
    """The environment of a shell that has not activated the virtual environment: its bin is not on PATH."""
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and os.path.realpath(p) != os.path.realpath(BIN)]
    return dict(os.environ, PATH=os.pathsep.join(path or ["/usr/bin", "/bin"]))


@pytest.mark.subprocess
def test_the_pages_lit_suite_passes_outside_an_activated_environment(written):
    """.venv/bin/lit run from a shell that never activated .venv: the page's lit.cfg.py finds pxla-opt and
    filecheck beside lit's python (a config that takes PATH as it is fails with 'pxla-opt': command not found)."""
    env = _outside_the_environment()
    assert subprocess.run(["sh", "-c", "command -v pxla-opt"], env=env, capture_output=True).returncode != 0
    update = [line.split() for line in _sh_lines() if line.startswith("pxla-mlir update-checks")]
    assert update, "the page shows update-checks at work"
    for words in update:  # what the page promises of update-checks, on the test it shows
        done = subprocess.run([os.path.join(BIN, "pxla-mlir"), *words[1:]], cwd=written, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    assert "jax.buffer_donor = true" in (written / "lit" / "donate_generated.mlir").read_text()
    done = subprocess.run([os.path.join(BIN, "lit"), "-v", "lit"], cwd=written, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and "Passed: 3" in done.stdout, done.stdout + done.stderr


def _sh_lines() -> list[str]:
    """The commands of the page's sh blocks, heredocs left out."""
    text = HEREDOC.sub("", (REPO / "docs" / "writing-a-pass.md").read_text())
    return [line.strip() for block in re.findall(r"^```sh\n(.*?)^```$", text, re.S | re.M)
            for line in block.splitlines() if line.strip()]
