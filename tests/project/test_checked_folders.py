"""The folders pyright checks in full: no module of the jax-free floor
(passes/, pxla_mlir/mlir/), the tools or the multi-process layer goes back
on pyproject.toml's pyright ``ignore`` list."""

import tomllib

from conftest import REPO

CHECKED = ("passes/", "pxla_mlir/mlir/", "pxla_mlir/tools/", "pxla_mlir/distributed/")


def test_checked_folders_stay_off_the_ignore_list():
    ignored = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pyright"].get("ignore", [])
    back = [path for path in ignored if path.startswith(CHECKED)]
    assert not back, f"fix pyright's findings in {back} instead of ignoring them"
