"""The terminal picture of a sharding, from Python and from pxla-mlir."""

import os
import re
import subprocess
import sys

import pytest

from pxla_mlir.mlir.sharding import (
    AbstractMesh,
    Chunked,
    HloSharding,
    Replicated,
    ShardedAxis,
    ShardingSpec,
    hlo_sharding,
)
from pxla_mlir.mlir.sharding.show import shard_ranges, show_sharding


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


def run(*args, **env):
    return subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", "show-sharding", *args],
                          capture_output=True, text=True, env={**os.environ, **env})


@pytest.mark.subprocess
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
    (("--shape", "a,b", "--hlo", "{replicated}"), "argument --shape: 'a,b': dimension 0's size 'a' is not an integer"),
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
    (("--shape", "8", "--hlo", "{replicated}", "--devices", "100000000"),
     "--devices 100000000 is more than the 1048576 devices a sharding may span"),
])
@pytest.mark.subprocess
def test_cli_errors(args, message):
    p = run(*args)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.startswith("pxla-mlir: error: ") and message in p.stderr, p.stderr
    assert "PXLA_DEBUG" not in p.stderr


@pytest.mark.subprocess
def test_cli_devices_sets_how_many_hold_a_replicated_array():
    p = run("--shape", "8", "--hlo", "{replicated}", "--devices", "3", "--no-color")
    assert p.returncode == 0, p.stderr
    assert "│ dev 0 │ dev 1 │ dev 2 │" in p.stdout and "dev 3" not in p.stdout


@pytest.mark.subprocess
def test_large_pictures_are_summarized():
    p = run("--shape", "65536", "--mesh", "x=65536", "--dims", "x", "--no-color")
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.splitlines()) < 20 and max(map(len, p.stdout.splitlines())) <= 120
    assert "│ dev 0 │ dev 1 │" in p.stdout and "│ ... │" in p.stdout and "dev 65535" in p.stdout
    assert "[65535:65536]" in p.stdout
    summary = " ".join(p.stdout.split("summarized: ", 1)[1].split())
    assert summary.startswith("the array view draws 1 of 1 rows and 7 of 65536 columns of pieces; the device view "
                              "draws 7 of 65536 devices (1x65536)")
    grid = show_sharding((40, 40), "{devices=[20,20,4]<=[1600] last_tile_dim_replicate}", color=False)
    assert "dev 0-3" in grid and "dev 1596-1599" in grid  # four devices hold each piece
    assert "draws 7 of 20 rows and 7 of 20 columns of pieces" in " ".join(grid.split())
    strided = show_sharding((8,), "{devices=[2,8]<=[8,2]T(1,0) last_tile_dim_replicate}", color=False)
    assert "dev 0,2,...(8)" in strided and "summarized" not in strided


@pytest.mark.parametrize("env, flags, wanted", [
    ({}, (), False),  # not a terminal
    ({"FORCE_COLOR": "1"}, (), True),
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, (), False),
    ({"NO_COLOR": "1"}, ("--color", "always"), True),  # the user forces it
    ({"FORCE_COLOR": "1"}, ("--no-color",), False),
])
def test_colors_follow_the_terminal_and_no_color(monkeypatch, capsys, env, flags, wanted):
    from pxla_mlir.tools import cli, cmd_diff

    for name in ("FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["show-sharding", "--shape", "4", "--mesh", "x=2", "--dims", "x", *flags]) == 0
    assert bool(re.search(r"\x1b\[[0-9;]*3[1-7]m", capsys.readouterr().out)) == wanted
    choice = "never" if "--no-color" in flags else flags[1] if flags else "auto"
    assert cmd_diff.use_color(choice, sys.stdout) == wanted  # diff decides the same way


def test_the_device_view_colors_each_piece_without_an_array_view():
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), force_terminal=True, color_system="standard", width=120)
    show_sharding((2, 4, 6), AbstractMesh((2, 2, 2), ("a", "b", "c")).sharding_spec(3, {"a": 0, "b": 1, "c": 2}),
                  console=console)
    out = console.file.getvalue()
    assert "\x1b[31m" in out and "\x1b[32m" in out and "\x1b[2m" not in out  # red, green, ...; nothing dim


def test_other_objects_are_a_clear_error():
    with pytest.raises(TypeError, match=r"cannot draw 42: pass a jax sharding \(NamedSharding, \.\.\.\), a ShardingSpec"):
        show_sharding((8,), 42, color=False)
