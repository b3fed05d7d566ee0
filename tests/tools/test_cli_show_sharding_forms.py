"""pxla-mlir show-sharding takes every form a sharding is written in: Shardy
text, jax's PartitionSpec, HLO strings (as an argument too), and a module
file, whose every argument and result sharding it draws."""

from __future__ import annotations

import pytest
from conftest import REPO

from pxla_mlir.tools import cli

XMAP_2D = REPO / "examples" / "goldens" / "xmap_2d.mlir"

SDY_MODULE = """
module @m attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func public @main(%arg0: tensor<8x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>},
                         %arg1: tensor<4xf32>) -> (tensor<8x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {?}]>}) {
    return %arg0 : tensor<8x12xf32>
  }
}
"""
GSPMD_MODULE = """
module @m attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<8x12xf32> {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"})
      -> tensor<8x12xf32> {
    return %arg0 : tensor<8x12xf32>
  }
}
"""


def _show(capsys, *argv) -> tuple[int, str, str]:
    rc = cli.main(["show-sharding", "--no-color", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _first_line(capsys, *argv) -> str:
    rc, out, err = _show(capsys, *argv)
    assert rc == 0, err
    return out.splitlines()[0]


@pytest.mark.parametrize(("argv", "hlo"), [
    (['#sdy.sharding<@mesh, [{"x"}, {"y"}]>', "--mesh", "x=2,y=4"], "{devices=[2,4]<=[8]}"),
    (["--sdy", '#sdy.sharding<@mesh, [{"x"}, {}]>', "--mesh", "x=2,y=4"],
     "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"),
    (['#sdy.sharding<@mesh, [{"y", "x"}, {}]>', "--mesh", "x=2,y=4"], "{devices=[8,1]<=[2,4]T(1,0)}"),
    (['#sdy.sharding<mesh<["a"=2, "b"=4]>, [{}, {"b", ?}], replicated={"a"}>'],
     "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"),
    (["P('x', 'y')", "--mesh", "x=2,y=4"], "{devices=[2,4]<=[8]}"),
    (["--pspec", "PartitionSpec(None, ('x', 'y'))", "--mesh", "x=2,y=4"], "{devices=[1,8]<=[8]}"),
    (["P('y')", "--mesh", "x=2,y=4"], "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"),
    (["P()", "--mesh", "x=2,y=4"], "{replicated}"),
    (["{devices=[2,4]<=[8]}"], "{devices=[2,4]<=[8]}"),
])
def test_each_form_draws_the_sharding_it_means(capsys, argv, hlo):
    assert _first_line(capsys, "--shape", "8,16", *argv) == f"(8, 16) {hlo}"


def test_a_replicated_named_sharding_spans_its_whole_mesh(capsys):
    rc, out, err = _show(capsys, "--shape", "8,16", "P()", "--mesh", "x=2,y=4")
    assert rc == 0 and "dev 0-7" in out, err


def test_a_module_file_draws_every_argument_and_result(capsys, tmp_path):
    path = tmp_path / "sdy.mlir"
    path.write_text(SDY_MODULE)
    rc, out, err = _show(capsys, path)
    assert rc == 0, err
    headers = [l for l in out.splitlines() if l.startswith("@")]
    assert headers == ['@main argument 0: tensor<8x12xf32>: sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>',
                       "@main argument 1: tensor<4xf32>: no sharding",
                       "@main result 0: tensor<8x12xf32>: sdy.sharding = #sdy.sharding<@mesh, [{}, {?}]>"]
    assert "(8, 12) {devices=[2,4]<=[8]}" in out and "(8, 12) {replicated}" in out
    path.write_text(GSPMD_MODULE)
    rc, out, err = _show(capsys, path)
    assert rc == 0, err
    assert out.startswith('@main argument 0: tensor<8x12xf32>: mhlo.sharding = "{devices=[2,1,4]<=[8] '
                          'last_tile_dim_replicate}"\n(8, 12) {devices=[2,1,4]<=[8] last_tile_dim_replicate}')
    assert "@main result 0: tensor<8x12xf32>: no sharding" in out


def test_a_replica_mode_module_shows_each_replicas_piece_of_the_global_value(capsys):
    rc, out, err = _show(capsys, XMAP_2D)
    assert rc == 0, err
    assert out.startswith('@main argument 0: tensor<4x4xf32>: pxla.tile_dims = [["x"], ["y"]] (of the global 8x16, '
                          'over pxla.mesh x=2, y=4)\n(8, 16) {devices=[2,4]<=[8]}')


@pytest.mark.parametrize(("argv", "message"), [
    (["--shape", "8", '#sdy.sharding<@mesh, [{"x"}]>'],
     "names the mesh @mesh: give its axes with --mesh, e.g. --mesh x=2,y=4"),
    (["--shape", "8", "P('x')"], "P('x') names mesh axes: give their sizes with --mesh"),
    (["--shape", "8", "P('z')", "--mesh", "x=2"], "mesh axis 'z' is not in the mesh (x=2)"),
    (["--shape", "8,8", "P('x', 'x')", "--mesh", "x=2"], "mesh axis 'x' shards more than one dimension"),
    (["--shape", "8", "P('x', None)", "--mesh", "x=2"], "shards 2 dimensions of a 1-d shape (8,)"),
    (["--shape", "8", "P(x)", "--mesh", "x=2"], "not a PartitionSpec: 'P(x)'; expected P('x', None)"),
    (["--shape", "8", '#sdy.sharding<@mesh, [{"x":(1)2}]>', "--mesh", "x=4"], "sub-axis"),
    (["--shape", "8", "#sdy.sharding<@mesh>"], "not a Shardy sharding"),
    (["--shape", "8", "devices=[2]"], "cannot tell what 'devices=[2]' is"),
    (["P('x')", "--mesh", "x=2"], "--shape is needed for one sharding"),
    (["--shape", "8", "P('x')", "--pspec", "P('x')", "--mesh", "x=2"], "give the sharding once"),
    ([XMAP_2D, "--shape", "8"], "--shape does not apply to a module file"),
])
def test_mistakes_are_one_line_that_says_how_to_fix_them(capsys, argv, message):
    rc, out, err = _show(capsys, *argv)
    assert rc == 2 and not out
    assert err.startswith("pxla-mlir: error: ") and message in err and err.count("\n") == 1, err
