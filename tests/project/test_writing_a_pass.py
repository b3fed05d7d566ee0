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
            "lit/donate_arguments_errors.mlir"} <= set(files)
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


@pytest.mark.subprocess
def test_the_pages_lit_suite_passes(written):
    lit = os.path.join(os.path.dirname(sys.executable), "lit")
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
    done = subprocess.run([lit, "-v", "lit"], cwd=written, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Passed: 2" in done.stdout, done.stdout + done.stderr
