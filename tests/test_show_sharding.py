"""The terminal picture of a sharding, from Python and from pxla-mlir."""

import subprocess
import sys

import pytest

from pxla_mlir.sharding import AbstractMesh, Chunked, HloSharding, Replicated, ShardedAxis, ShardingSpec, hlo_sharding
from pxla_mlir.sharding.show import shard_ranges, show_sharding


def test_ranges_from_spec_and_from_hlo_agree():
    spec = AbstractMesh((2, 4), ("x", "y")).sharding_spec(2, {"y": 0, "x": 1})
    assert shard_ranges((8, 6), spec) == shard_ranges((8, 6), hlo_sharding.of_spec(spec)) == \
        shard_ranges((8, 6), str(hlo_sharding.of_spec(spec))) == shard_ranges((8, 6), repr(spec))
    assert shard_ranges((8, 6), spec)[1] == ((2, 4), (0, 3))  # device (x=0, y=1)


def test_picture_shows_pieces_and_devices(capsys):
    spec = ShardingSpec([Chunked([4])], [ShardedAxis(0), Replicated(2)])
    text = show_sharding((4,), spec, color=False)
    assert "dev 0,1" in text and "dev 6,7" in text and "[3:4]" in text  # array view
    lines = text.splitlines()  # device view: a grid of devices, each over its piece
    row = lines.index("│ dev 4 │ dev 5 │")
    assert lines[row + 1] == "│ [2:3] │ [2:3] │"
    assert capsys.readouterr().out.count("dev 0,1") == 1


def test_maximal_and_three_dims():
    text = show_sharding((4, 4), HloSharding.maximal(2), num_devices=4, color=False)
    lines = text.splitlines()
    row = lines.index("│  dev 0  │  dev 1  │   dev 2    │  dev 3  │")
    assert lines[row + 1] == "│ nothing │ nothing │ [0:4, 0:4] │ nothing │"  # only device 2 holds it
    text = show_sharding((2, 4, 6), AbstractMesh((2, 2, 2), ("a", "b", "c")).sharding_spec(3, {"c": 0, "a": 1, "b": 2}),
                         color=False)
    assert "[1:2, 2:4, 3:6]" in text


def test_large_pictures_are_summarized():
    """A 4,096-device picture is a summary, not a table of 4,096 cells (a 2^20-device one took rich minutes)."""
    mesh = AbstractMesh((4096,), ("x",))
    text = show_sharding((8192,), mesh.sharding_spec(1, {"x": 0}), color=False)
    assert "array: 4096 pieces, more than 256 to draw" in text and "4080 more devices" in text
    assert "[0:2]" in text and "[8190:8192]" in text and "[4000:4002]" not in text
    assert len(text.splitlines()) < 30


def run(*args):
    return subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", "show-sharding", *args],
                          capture_output=True, text=True)


def test_cli():
    p = run("--shape", "8,12", "--mesh", "x=2,y=4", "--dims", "x,y", "--no-color")
    assert p.returncode == 0 and "[4:8, 9:12]" in p.stdout
    p = run("--shape", "8,3", "--hlo", "{devices=[4,1,2]<=[8] last_tile_dim_replicate}", "--no-color")
    assert p.returncode == 0 and "dev 6,7" in p.stdout


@pytest.mark.parametrize("args, message", [
    (("--shape", "6", "--mesh", "x=4", "--dims", "x"), "size 6, which mesh axes 'x' (size 4) do not divide"),
    (("--shape", "8", "--mesh", "x=4", "--dims", "z"), "mesh axis 'z'"),
    (("--shape", "8", "--hlo", "{devices=[3]0,1}"), "lists 2 devices for tile [3]"),
    (("--shape", "8", "--spec", "ShardingSpec((Chunked([8]),), ())"), "sharded axis 0 is never placed"),
    (("--shape", "a,b", "--hlo", "{replicated}"), "--shape must be comma-separated integers"),
    (("--shape", "8",), "give exactly one of --hlo, --spec, or --mesh"),
    (("--shape", "8", "--mesh", "x=2"), "--mesh needs --dims"),
    (("--shape", "8", "--mesh", "x:2", "--dims", "x"), "--mesh must look like x=2,y=4"),
    (("--shape", "8", "--hlo", "{devices=[4]<=[4]}", "--devices", "0"),
     "argument --devices: expected a positive integer, got 0"),
    (("--shape", "8", "--hlo", "{devices=[4]<=[4]}", "--devices", "-1"),
     "argument --devices: expected a positive integer, got -1"),
    (("--shape", "8", "--hlo", "{devices=[4]<=[4]}", "--devices", "2"),
     "the sharding names 4 devices, so --devices 2 is too few"),
    (("--shape", "8", "--mesh", "x=4", "--dims", "x", "--devices", "2"),
     "this sharding spans exactly 4 devices; drop --devices or give --devices 4"),
])
def test_cli_errors(args, message):
    p = run(*args)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.startswith("pxla-mlir: error: ") and message in p.stderr, p.stderr
    assert "PXLA_DEBUG" not in p.stderr


def test_cli_devices_sets_how_many_hold_a_replicated_array():
    p = run("--shape", "8", "--hlo", "{replicated}", "--devices", "3", "--no-color")
    assert p.returncode == 0, p.stderr
    assert "│ dev 0 │ dev 1 │ dev 2 │" in p.stdout and "dev 3" not in p.stdout
