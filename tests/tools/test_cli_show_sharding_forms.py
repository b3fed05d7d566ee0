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
    (["--shape", "8", "P(x)", "--mesh", "x=2"], "not a PartitionSpec: 'P(x)': dimension 0's entry x is not None"),
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


#: PartitionSpecs as docs/cli.md, docs/guide.md and jax's repr write them, bare tuples and the plain form.
PSPEC_FORMS = [
    "P(('x', 'y'),)", "P('x', None)", "P(None, 'x')", "P('x',)", "P()", "P(None,)", "P(None, \"y\")",
    "PartitionSpec(('x', 'y'),)", "jax.sharding.PartitionSpec('y', 'x')", "jax.P('x')", "P(('y', 'x'))",
    "('x', None)", "(('x', 'y'), None)", "x,y", "y,x", "x*y,-", "(y, x),None", "-,y", "x,", "None",
]


def _jax_spec(text: str):
    import jax
    from jax.sharding import PartitionSpec

    from pxla_mlir.mlir.sharding.pspec_text import parse

    if "(" not in text or text.startswith("(") or "*" in text:  # bare tuples and plain text: their P(...)
        return PartitionSpec(*parse(text).entries)
    return eval(text, {"P": PartitionSpec, "PartitionSpec": PartitionSpec, "jax": jax})


@pytest.mark.parametrize(("text", "how"), [*((t, "flag") for t in PSPEC_FORMS),  # plain x,y: --pspec only
                                           *((t, "argument") for t in PSPEC_FORMS if t.startswith(("P", "jax", "(")))])
def test_each_pspec_form_draws_the_pieces_jax_gives_each_device(capsys, text, how):
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding

    from pxla_mlir.mlir.sharding import parse_hlo_sharding
    from pxla_mlir.mlir.sharding.show import shard_ranges

    shape = (8, 16)
    given = [f"--pspec={text}"] if how == "flag" else [text]
    line = _first_line(capsys, "--shape", "8,16", *given, "--mesh", "x=2,y=4")
    hlo = line.split(" ", 2)[2]
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))
    expected = NamedSharding(mesh, _jax_spec(text)).devices_indices_map(shape)
    ours = shard_ranges(shape, parse_hlo_sharding(hlo), num_devices=8)
    for device, index in expected.items():
        assert ours[device.id] == tuple(s.indices(n)[:2] for s, n in zip(index, shape)), (text, device)


def test_unreduced_axes_draw_the_layout_and_say_what_the_devices_hold(capsys):
    rc, out, err = _show(capsys, "--shape", "8,16", "--pspec", "P('x', unreduced={'y'})", "--mesh", "x=2,y=4")
    assert rc == 0 and out.startswith("(8, 16) {devices=[2,1,4]<=[8] last_tile_dim_replicate}")
    assert err == ("pxla-mlir: note: unreduced={'y'}: the devices along y hold partial sums of their piece; the "
                   "picture shows the layout\n")


@pytest.mark.parametrize(("argv", "message"), [
    (["--pspec", "P('x', UNCONSTRAINED)"], "dimension 1 is UNCONSTRAINED, which leaves its layout to XLA's "
                                           "partitioner"),
    (["--pspec", "P('x', unreduced={'z'})"], "unreduced mesh axis 'z' is not in the mesh (x=2, y=4)"),
    (["--pspec", "x,,y"], "dimension 1's entry is empty"),
    (["P(1, 4)"], "piece counts such as P(1, 4) are sharded_jit's"),
])
def test_pspec_mistakes_name_the_entry(capsys, argv, message):
    rc, out, err = _show(capsys, "--shape", "8,16", *argv, "--mesh", "x=2,y=4")
    assert rc == 2 and not out
    assert err.startswith("pxla-mlir: error: ") and message in err and err.count("\n") == 1, err


@pytest.mark.parametrize(("shape", "why"), [
    ("8,x", "'8,x': dimension 1's size 'x' is not an integer"),
    ("8.5", "'8.5': dimension 0's size '8.5' is not an integer"),
    ("8,-3", "'8,-3': dimension 1's size -3 is negative"),
    ("-3,8", "'-3,8': dimension 0's size -3 is negative"),
    ("8,,4", "'8,,4': dimension 1's size is empty"),
    ("8,", "'8,': dimension 1's size is empty (it ends in a comma)"),
    (",8", "',8': dimension 0's size is empty"),
    ("", "'': no sizes"),
    ("8x", "'8x': dimension 0's size '8x' is not an integer"),
])
def test_a_malformed_shape_is_a_usage_error_naming_the_bad_size(capsys, shape, why):
    rc, out, err = _show(capsys, f"--shape={shape}", "--hlo", "{replicated}")
    assert rc == 2 and not out
    assert err == (f"pxla-mlir: error: argument --shape: {why}; give the array's sizes, e.g. 8,12 "
                   f"(see pxla-mlir show-sharding --help)\n")


@pytest.mark.parametrize(("shape", "drawn"), [("8,12", "(8, 12)"), ("8x12", "(8, 12)"), (" 8 , 12 ", "(8, 12)"),
                                              ("0", "(0,)")])
def test_a_well_formed_shape_is_the_shape_drawn(capsys, shape, drawn):
    assert _first_line(capsys, f"--shape={shape}", "--hlo", "{replicated}") == f"{drawn} {{replicated}}"
