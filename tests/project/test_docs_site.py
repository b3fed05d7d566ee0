"""The documentation site builds offline with ``mkdocs build --strict`` (as
``make docs`` runs it): every page in the navigation, every link and anchor
found. Skipped where the docs extra (mkdocs, mkdocs-material) is not installed."""

import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


def test_site_builds_strict(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (make docs installs it)")
    pytest.importorskip("material", reason="the docs extra is not installed (make docs installs it)")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for page in ("index.html", "guide.html", "porting.html", "cli.html", "passes.html", "pxla-form.html",
                 "architecture.html", "contributing.html", "multiprocess.html"):
        assert (tmp_path / "site" / page).exists(), page
