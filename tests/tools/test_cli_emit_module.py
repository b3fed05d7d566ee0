"""pxla-mlir emit FILE.mlir: a module file's stages (the module XLA gets,
jaxlib's HLO of it, XLA's optimized HLO), and the flags that do not apply to one."""

from __future__ import annotations

import pytest
from conftest import REPO

from pxla_mlir.tools import cli

PER_DEVICE = REPO / "examples" / "per_device_psum.mlir"


def _emit(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main(["emit", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_stage_xla_of_a_module_file_is_xlas_optimized_hlo(capsys):
    rc, out, err = _emit(capsys, PER_DEVICE, "--stage", "xla")
    assert rc == 0, err
    assert out.startswith("HloModule per_device_psum, is_scheduled=true") and "replica_count=4" in out
    assert "all-reduce" in out and "erf" in out


def test_stage_hlo_is_the_hlo_before_xlas_optimizations(capsys):
    rc, out, err = _emit(capsys, PER_DEVICE, "--stage", "hlo")
    assert rc == 0, err
    assert out.startswith("HloModule per_device_psum,") and "is_scheduled" not in out.splitlines()[0]


def test_stage_mhlo_is_the_module_xla_gets(capsys, tmp_path):
    rc, out, err = _emit(capsys, PER_DEVICE, "-o", tmp_path / "out.mlir")
    assert rc == 0 and not out, err
    text = (tmp_path / "out.mlir").read_text()
    assert "mhlo.all_reduce" in text and "pxla.tile_dims" in text  # legalized, with its device axis
    rc, out, err = _emit(capsys, PER_DEVICE, "--dialect", "stablehlo")
    assert rc == 0 and "stablehlo.all_reduce" in out, err


@pytest.mark.parametrize(("argv", "message"), [
    (["--stage", "pxla"], "--stage pxla: a module file has the stages mhlo, hlo, xla"),
    (["--stage", "after:pxla-expand-shard"], "a module file has the stages mhlo, hlo, xla"),
    (["--map", "pmap"], "--map says how to map a Python function; "),
    (["--arg", "f32[3]"], "--arg says how to map a Python function; "),
    (["--dump-dir", "d"], "--dump-dir writes a map's stages; for a module, run its passes with pxla-opt"),
    (["--stage", "xla", "--dialect", "stablehlo"], "--dialect applies to --stage mhlo"),
])
def test_flags_that_do_not_apply_to_a_module_say_why(capsys, argv, message):
    rc, out, err = _emit(capsys, PER_DEVICE, *argv)
    assert rc == 2 and not out
    assert err.startswith("pxla-mlir: error: ") and message in err and err.count("\n") == 1


def test_a_missing_module_file_is_one_line(capsys, tmp_path):
    rc, _, err = _emit(capsys, tmp_path / "nope.mlir", "--stage", "xla")
    assert rc == 2 and err == f"pxla-mlir: error: cannot read '{tmp_path / 'nope.mlir'}': No such file or directory\n"
