"""pxla-mlir emit / diff / run as a user types them."""

import os
import re
import subprocess
import sys

import pytest
from conftest import REPO

NESTED = str(REPO / "examples/nested_reduction.py") + ":two_level_sum"
XMAP = str(REPO / "examples/xmap_2d.py") + ":normalise_2d"
PLAIN = str(REPO / "examples/pmap_demo.py") + ":inner"  # a plain function: psum over 'j'


def cli(*args, stdin=None, cwd=None, **extra_env):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # the CLI sets 8 CPU devices itself
    env.update(extra_env)
    return subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", *map(str, args)], capture_output=True,
                          text=True, env=env, input=stdin, timeout=300, cwd=cwd)


@pytest.mark.subprocess
@pytest.mark.slow
def test_emit_to_a_file_then_diff_against_the_same_emit_is_empty(tmp_path):
    out = tmp_path / "nested.mlir"
    assert cli("emit", NESTED, "-o", out).returncode == 0
    same = cli("diff", out, NESTED)
    assert same.returncode == 0 and same.stdout == ""


@pytest.mark.subprocess
@pytest.mark.slow
def test_diff_against_the_other_unshard_strategy_shows_only_unshard_ops(tmp_path):
    out = tmp_path / "nested.mlir"
    cli("emit", NESTED, "-o", out)
    result = cli("diff", out, NESTED + "?unshard=all-reduce")
    assert result.returncode == 1
    changed = [l for l in result.stdout.splitlines() if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    assert changed
    # (the all-reduce strategy sums floats as their bit patterns: bitcasts and integer zeros)
    unshard = re.compile(r"dynamic_update_slice|all_reduce|all_gather|mhlo\.constant dense<0(\.0+e\+00)?>|\^bb0|"
                         r"mhlo\.add %b|mhlo\.return|\}\) : \(tensor<\w+>\) -> tensor<\w+>|bitcast_convert|"
                         r"mhlo\.reshape %(all|dynamic|bitcast)")
    assert all(unshard.search(l) for l in changed), [l for l in changed if not unshard.search(l)]
    assert any("all_gather" in l for l in changed if l.startswith("-"))
    assert any("dynamic_update_slice" in l for l in changed if l.startswith("+"))


@pytest.mark.parametrize("shardings, attr, old, new", [
    ("gspmd", "mhlo.sharding", "<=[8]", "0,1,2,3,4,5,6,7"),
    ("sdy", "sdy.sharding", '[{"x"}, {"y"}]>', '[{"x"}, {}]>'),
])
@pytest.mark.subprocess
def test_diff_ignores_attributes_on_request(tmp_path, shardings, attr, old, new):
    a = cli("emit", XMAP, "--lowering", "vectorize", "--shardings", shardings).stdout
    assert old in a
    (tmp_path / "a.mlir").write_text(a)
    (tmp_path / "b.mlir").write_text(a.replace(old, new))
    assert cli("diff", tmp_path / "a.mlir", tmp_path / "b.mlir").returncode == 1
    assert cli("diff", tmp_path / "a.mlir", tmp_path / "b.mlir", "--ignore", attr).returncode == 0


@pytest.mark.subprocess
@pytest.mark.slow
def test_stages_dumps_and_dialects(tmp_path):
    pxla = cli("emit", NESTED, "--stage", "pxla").stdout
    assert "@pxla.shard" in pxla and "pxla.tile_dims" in pxla
    after = cli("emit", NESTED, "--stage", "after:pxla-expand-shard").stdout
    assert "@pxla.shard" not in after and "@pxla.unshard" in after
    xla = cli("emit", NESTED, "--stage", "xla").stdout
    assert xla.startswith("HloModule") and "all-gather" in xla
    stable = cli("emit", NESTED, "--dialect", "stablehlo").stdout
    assert "stablehlo.all_gather" in stable and "mhlo." not in stable.replace("mhlo.num_", "")
    dumps = tmp_path / "dumps"
    assert cli("emit", NESTED, "--dump-dir", dumps).returncode == 0
    names = sorted(p.name for p in dumps.iterdir())
    assert names[:6] == ["00_input.mlir", "01_pxla-verify-form.mlir", "02_chlo-legalize-to-hlo.mlir",
                         "03_stablehlo-legalize-to-hlo.mlir", "04_pxla-fold-shard-of-unshard.mlir",
                         "05_pxla-expand-shard.mlir"]
    assert names[-1].endswith("_pxla-verify-handoff.mlir")
    custom = cli("emit", NESTED, "--pipeline", "builtin.module(stablehlo-legalize-to-hlo,pxla-expand-shard,"
                                               "pxla-expand-unshard{strategy=all-reduce})")
    assert "dynamic_update_slice" in custom.stdout and "partition_id" in custom.stdout
    unlegalized = cli("emit", NESTED, "--pipeline", "builtin.module(pxla-expand-shard)")
    assert unlegalized.returncode == 2 and "legalize the module to MHLO first" in unlegalized.stderr


@pytest.mark.subprocess
@pytest.mark.slow
def test_plain_function_with_map_flags(tmp_path):
    src = tmp_path / "prog.py"
    src.write_text("from jax import lax\ndef f(x, w):\n    return lax.psum(x * w, 'i')\n")
    flags = ("emit", f"{src}:f", "--map", "pmap", "--axis-name", "i", "--in-axes", "(0, None)",
             "--arg", "f32[8,4]", "--arg", "f32[4]", "--mode", "partition")
    result = cli(*flags)
    assert result.returncode == 0, result.stderr
    assert 'sdy.sharding = #sdy.sharding<@mesh, [{"i"}, {}]>' in result.stdout
    gspmd = cli(*flags, "--shardings", "gspmd")
    assert gspmd.returncode == 0, gspmd.stderr
    assert 'mhlo.sharding = "{devices=[8,1]<=[8]}"' in gspmd.stdout and "sdy" not in gspmd.stdout


@pytest.mark.subprocess
def test_diff_reads_bytecode_and_stdin(tmp_path):
    text = cli("emit", NESTED).stdout
    (tmp_path / "a.mlir").write_text(text)
    opt = subprocess.run([sys.executable, "-m", "pxla_mlir.mlir.cli.pxla_opt", tmp_path / "a.mlir", "--emit-bytecode",
                          "-o", tmp_path / "a.mlirbc"], capture_output=True, timeout=300)
    assert opt.returncode == 0, opt.stderr
    same = cli("diff", tmp_path / "a.mlirbc", "-", stdin=text)
    assert same.returncode == 0 and same.stdout == "", same.stderr
    other = cli("diff", tmp_path / "a.mlirbc", "-", stdin=text.replace("mhlo.num_replicas = 8", "mhlo.num_replicas = 4"))
    assert other.returncode == 1 and "+module @pmap_two_level_sum attributes {mhlo.num_partitions = 1 : i32, " \
                                     "mhlo.num_replicas = 4" in other.stdout


@pytest.mark.subprocess
@pytest.mark.slow
def test_targets_import_like_python(tmp_path):
    (tmp_path / "helper_mod.py").write_text("AXIS = 'i'\n")
    (tmp_path / "mymod.py").write_text("from jax import lax\nimport helper_mod\n\n"
                                       "def f(x):\n    return lax.psum(x, helper_mod.AXIS)\n")
    flags = ("--map", "pmap", "--axis-name", "i", "--arg", "f32[8,2]")
    here = cli("emit", "mymod:f", *flags, cwd=tmp_path)  # the current directory, as for python -m
    assert here.returncode == 0 and "mhlo.all_reduce" in here.stdout, here.stderr
    there = cli("emit", tmp_path / "mymod.py:f", *flags)  # a file's own imports from its directory
    assert there.returncode == 0 and "mhlo.all_reduce" in there.stdout, there.stderr
    odd = tmp_path / os.fsdecode(b"\xff-dir")
    odd.mkdir()
    (odd / "prog.py").write_text("def f(x):\n    return x\n")
    result = cli("emit", f"{odd}/prog.py:f", *flags)
    assert result.returncode == 2 and result.stderr == (
        f"pxla-mlir: error: bad target: the path '{tmp_path}/\\xff-dir/prog.py' is not UTF-8, and jax cannot record "
        f"such file names in MLIR locations; rename the directory (or move the file) to a UTF-8 name\n")


@pytest.mark.subprocess
def test_cpu_devices_says_when_it_cannot_apply():
    result = cli("show-sharding", "--shape", "4", "--hlo", "{replicated}", "--devices", "2", "--cpu-devices", "4",
                 "--no-color", JAX_PLATFORMS="tpu")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ("pxla-mlir: note: --cpu-devices 4 does not apply: JAX_PLATFORMS=tpu runs on other "
                             "devices (add --backend cpu to run on 4 CPU devices)\n")


@pytest.mark.subprocess
@pytest.mark.slow
def test_backend_picks_the_platform_before_jax_starts():
    """--backend cpu is JAX_PLATFORMS=cpu (here over JAX_PLATFORMS=tpu), so --cpu-devices applies, and a
    computation needing more devices than it has names that backend and the flags that give more."""
    result = cli("emit", NESTED, "--backend", "cpu", "--cpu-devices", "4", JAX_PLATFORMS="tpu")
    assert result.returncode == 2, result.stdout
    (line,) = result.stderr.splitlines()
    assert "but only 4 XLA devices are available" in line and "4 CPU devices exist on jax's default backend " \
        "(JAX_PLATFORMS=cpu) (on CPU: Python: set XLA_FLAGS=--xla_force_host_platform_device_count=8 before " \
        "importing jax" in line
    assert line.endswith("pxla-mlir: --cpu-devices 8; pytest: --pxla-cpu-devices 8)"), line
    ok = cli("--backend", "cpu", "emit", NESTED, JAX_PLATFORMS="tpu")
    assert ok.returncode == 0 and ok.stderr == "" and "mhlo.num_replicas = 8" in ok.stdout, ok.stderr


@pytest.mark.parametrize("value", ["", "cpu,tpu"])
@pytest.mark.subprocess
def test_backend_takes_one_platform(value):
    result = cli("emit", NESTED, "--backend", value)
    assert result.returncode == 2
    assert result.stderr == (f"pxla-mlir: error: argument --backend: expected one platform name (cpu, tpu, cuda, "
                             f"rocm), got {value!r} (see pxla-mlir emit --help)\n")


@pytest.mark.subprocess
def test_run_prints_timings_and_outputs():
    result = cli("run", NESTED, "--calls", "3")
    assert result.returncode == 0, result.stderr
    for word in ("trace", "import", "passes", "compile", "first call", "steady-state call", "output[0]",
                 "float32[2, 128, 4]"):
        assert word in result.stdout
    assert result.stderr.startswith("ran on 8 CPU devices; pipeline ") and "ran on" not in result.stdout  # what ran


def test_argument_shapes_take_jax_dtype_names_too():
    from pxla_mlir.tools.targets import ArgSpec, TargetError, parse_arg

    assert parse_arg("float32[8,3]") == parse_arg("f32[8,3]") == ArgSpec("float32", (8, 3))  # as jax.numpy names dtypes
    for jax_name, short in (("bfloat16[2]", "bf16[2]"), ("int32[]", "i32[]"), ("uint8[4]", "u8[4]"),
                            ("complex64[1]", "c64[1]"), ("bool[3]", "pred[3]")):
        assert parse_arg(jax_name) == parse_arg(short), jax_name
    with pytest.raises(TargetError, match=r"like f32\[8,128\], float32\[8,128\] .*jax's names: bfloat16, bool"):
        parse_arg("float[8]")


@pytest.mark.parametrize("args, message", [
    (("emit", "no_colon_here"), "bad target 'no_colon_here': expected module:function"),
    (("emit", "missing/file.py:f"), "no such file 'missing/file.py'"),
    (("emit", "json:nope"), "'json' has no attribute 'nope'"),
    (("emit", "no_such_module_xyz:f"), "cannot import 'no_such_module_xyz'"),
    (("emit", NESTED, "--arg", "f32[8,x]"), "bad argument shape 'f32[8,x]'"),
    (("emit", NESTED, "--arg", "float[8]"), "bad argument shape 'float[8]'"),
    (("emit", NESTED, "--stage", "optimized"),
     "argument --stage: invalid choice: 'optimized' (choose from 'pxla', 'mhlo', 'hlo', 'xla', 'after:<pass>')"),
    (("emit", NESTED, "--stage", "after:pxla-nope"),
     "unknown stage 'after:pxla-nope': the pipeline runs pxla-verify-form, chlo-legalize-to-hlo, "
     "stablehlo-legalize-to-hlo, pxla-fold-shard-of-unshard"),
    (("emit", NESTED, "--pipeline", "builtin.module(nope)"), "bad --pipeline: unknown pass or pipeline 'nope'"),
    (("emit", NESTED, "--lowering", "manual"),
     "--lowering does not apply to 'two_level_sum', which is already a pxla_mlir.pmap (on the command line it "
     "takes --mode, --unshard, --shardings, --pieces, --extra-passes)"),
    (("emit", NESTED, "--axis-name", "k"), "--axis-name does not apply to 'two_level_sum'"),
    (("emit", NESTED, "--mesh", "2x4:x,y"), "--mesh does not apply to 'two_level_sum'"),
    (("emit", NESTED, "--map", "xmap"), "--map xmap does not apply to 'two_level_sum'"),
    (("emit", XMAP, "--unshard", "all-reduce"), "--unshard does not apply to 'normalise', which is already a "
                                                "pxla_mlir.xmap (on the command line it takes --lowering, --shardings, "
                                                "--extra-passes, --mesh)"),
    (("emit", PLAIN, "--map", "xmap", "--in-axes", "['j', ...]", "--out-axes", "['j', ...]", "--mode", "partition",
      "--arg", "f32[8,3]"), "--mode does not apply to --map xmap (xmap takes --in-axes, --out-axes, "
                            "--axis-resources, --axis-sizes, --mesh, --lowering, --shardings, --extra-passes)"),
    (("emit", PLAIN, "--map", "pmap", "--axis-name", "j", "--lowering", "manual", "--arg", "f32[8,3]"),
     "--lowering does not apply to --map pmap (pmap takes --axis-name, --in-axes, --out-axes, --mode, --unshard, "
     "--shardings, --pieces, --extra-passes)"),
    (("emit", PLAIN, "--map", "pmap", "--axis-name", "j", "--axis-sizes", "{'j': 8}", "--arg", "f32[8,3]"),
     "--axis-sizes does not apply to --map pmap"),
    (("emit", NESTED, "--arg", "f32[8,1 2]"), "bad argument shape 'f32[8,1 2]': dimension '1 2' is not a "
                                              "non-negative integer"),
    (("emit", NESTED, "--arg", "f32[8,,3]"), "bad argument shape 'f32[8,,3]': a dimension is empty"),
    (("emit", NESTED, "--arg", "f32[8,3,]"), "bad argument shape 'f32[8,3,]': a dimension is empty"),
    (("emit", PLAIN, "--map", "pmap", "--axis-name", "j", "--arg", "f32[0,3]"),
     "argument 0 (f32[0,3]) has size 0 along its mapped axis 0"),
    (("emit", PLAIN, "--map", "pmap", "--axis-name", "j", "--in-axes", "1", "--arg", "f32[3,0]"),
     "argument 0 (f32[3,0]) has size 0 along its mapped axis 1"),
    (("run", NESTED, "--calls", "-5"), "argument --calls: expected a positive integer, got -5"),
    (("run", NESTED, "--calls", "0"), "argument --calls: expected a positive integer, got 0"),
    (("--cpu-devices", "-3", "emit", NESTED), "argument --cpu-devices: expected a positive integer, got -3"),
    (("--cpu-devices", "0", "emit", NESTED), "argument --cpu-devices: expected a positive integer, got 0"),
    (("emit", "collections:OrderedDict", "--map", "pmap", "--arg", "f32[8]"),
     "'OrderedDict' is a class, not a function"),
    (("emit", "math:pi", "--map", "pmap", "--arg", "f32[8]"), "'pi' is a float, not a function"),
    (("emit", XMAP, "--mesh", "0x8:x,y"), "bad mesh '0x8:x,y': every mesh axis needs a positive size, got 0x8"),
    (("emit", NESTED, "--pipeline", "builtin.module(" + "func.func(" * 500 + "cse" + ")" * 501),
     "the pipeline nests more than 64 levels"),
    (("emit", "json:dumps", "--arg", "f32[2]"), "is a plain function: give --map pmap or --map xmap"),
    (("emit", XMAP, "--mesh", "2x4"), "bad mesh '2x4'"),
    (("emit", XMAP, "--mesh", "4x4:x,y"), "needs 16 devices, but only 8 exist"),
    (("diff", "nope.mlir", NESTED), "cannot open 'nope.mlir'"),
    (("diff", NESTED + "?colour=red", NESTED), "unknown emit option 'colour'"),
    (("diff", NESTED + "?unshard=bogus", NESTED),
     "unshard=bogus in '" + NESTED + "': invalid choice: 'bogus' (choose from 'all-gather', 'all-reduce')"),
    (("diff", NESTED + "?unshard", NESTED), "bad emit spec '" + NESTED + "?unshard': bad query field: 'unshard'"),
    (("diff", str(REPO / "examples"), NESTED), "is a directory; give a .mlir file or an emit spec"),
    (("emit", NESTED, "--dump-dir", str(REPO / "README.md")), "is a file, not a directory"),
    (("emit", NESTED, "--dump-d", "x"), "unrecognized arguments: --dump-d x"),  # no abbreviations
    (("emit", NESTED, "--cpu-devices", "0"), "argument --cpu-devices: expected a positive integer, got 0"),
    (("emit", NESTED, "--cpu-devices", "4"), "but only 4 XLA devices are available"),  # after the command too
    (("emit",), "the following arguments are required: target"),
    (("frobnicate",), "invalid choice: 'frobnicate'"),
])
@pytest.mark.subprocess
def test_mistakes_give_one_line(args, message):
    result = cli(*args)
    assert result.returncode == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pxla-mlir: error: "), result.stderr
    assert message in lines[0], lines[0]
    assert "PXLA_DEBUG" not in lines[0]  # the hint is for bugs of pxla_mlir only


@pytest.mark.subprocess
def test_failing_user_module_is_one_line(tmp_path):
    src = tmp_path / "broken.py"
    src.write_text("raise RuntimeError('boom at import')\n")
    result = cli("emit", f"{src}:f")
    assert result.returncode == 2 and result.stderr.strip() == \
        f"pxla-mlir: error: importing '{src}' failed: RuntimeError: boom at import"


@pytest.mark.subprocess
def test_diff_rejects_invalid_mlir(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("module { func.func @f( }")
    result = cli("diff", bad, bad)
    assert result.returncode == 2 and "is not valid MLIR" in result.stderr and len(result.stderr.splitlines()) == 1
    binary = tmp_path / "binary.mlir"
    binary.write_bytes(b"module {\n}\n\xff\xfe")
    result = cli("diff", binary, bad)
    assert result.returncode == 2 and result.stderr == (f"pxla-mlir: error: '{binary}' is neither MLIR text nor MLIR "
                                                        f"bytecode: byte 0xff at line 3 is not UTF-8; give a .mlir "
                                                        f"file or an emit spec\n")


@pytest.mark.subprocess
def test_diff_reads_stdin_once_for_both_sides(tmp_path):
    module = "module {\n  func.func @f() {\n    return\n  }\n}\n"
    same = cli("diff", "-", "-", stdin=module)  # read once: it used to report every line removed
    assert same.returncode == 0 and same.stdout == "" and same.stderr == ""
    other = tmp_path / "other.mlir"
    other.write_text(module.replace("@f", "@g"))
    assert cli("diff", other, "-", stdin=module).returncode == 1


@pytest.mark.subprocess
def test_emit_refuses_a_dump_dir_that_is_a_file(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    for where, why in ((afile, "is a file, not a directory"), (afile / "sub", "cannot make --dump-dir")):
        result = cli("emit", NESTED, "--dump-dir", where)
        assert result.returncode == 2 and result.stderr.startswith("pxla-mlir: error: ")
        assert why in result.stderr and len(result.stderr.splitlines()) == 1


@pytest.mark.subprocess
def test_errors_in_the_users_function_name_its_line_without_the_debug_hint(tmp_path):
    src = tmp_path / "prog.py"
    src.write_text("import jax.numpy as jnp\n\ndef f(x):\n    return jnp.dot(x, jnp.ones(5))\n")
    result = cli("emit", f"{src}:f", "--map", "pmap", "--arg", "f32[8,3]")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "pxla-mlir: error: TypeError: dot_general requires contracting dimensions to have the same shape, got (3,) "
        f"and (5,). (in f, {src}:4)"]


def test_a_bug_of_pxla_mlir_asks_for_the_traceback(monkeypatch, capsys):
    from pxla_mlir.mlir.pass_infra.options import choices
    from pxla_mlir.mlir.pipelines import PmapPipeline
    from pxla_mlir.tools import cli as cli_module, cmd_emit

    monkeypatch.delenv("PXLA_DEBUG", raising=False)
    # A KeyError raised inside pxla_mlir stands for a bug of ours.
    monkeypatch.setattr(cmd_emit, "stage_text", lambda *args, **kwargs: choices(PmapPipeline, "nope"))
    assert cli_module.main(["emit", NESTED]) == 2
    assert capsys.readouterr().err == ("pxla-mlir: error: KeyError: \"PmapPipeline has no choice option 'nope'\" "
                                       "(set PXLA_DEBUG=1 for the traceback)\n")


def test_a_bug_of_pxla_mlir_under_a_map_is_still_one(monkeypatch, capsys):
    """The command line is an entry point: the maps it lowers keep their frames, which tell a bug of ours
    (here one called from a function outside the package) from a mistake in the user's function."""
    from pxla_mlir.mlir.pass_infra.options import choices
    from pxla_mlir.mlir.pipelines import PmapPipeline
    from pxla_mlir.pmaps import api
    from pxla_mlir.tools import cli as cli_module

    monkeypatch.delenv("PXLA_DEBUG", raising=False)
    monkeypatch.setattr(api, "lower_traced", lambda *args, **kwargs: choices(PmapPipeline, "nope"))
    assert cli_module.main(["emit", NESTED]) == 2
    assert capsys.readouterr().err.endswith("(set PXLA_DEBUG=1 for the traceback)\n")


@pytest.mark.subprocess
def test_diff_sees_a_changed_module_attribute(tmp_path):
    body = "  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n    return %x : tensor<2xf32>\n  }\n}\n"
    for header in ("module @m attributes {{mhlo.num_partitions = {} : i32, mhlo.num_replicas = 8 : i32}} {{\n",
                   "module attributes {{mhlo.num_partitions = {} : i32}} {{\n"):
        (tmp_path / "a.mlir").write_text(header.format(1) + body)
        (tmp_path / "b.mlir").write_text(header.format(2) + body)
        result = cli("diff", tmp_path / "a.mlir", tmp_path / "b.mlir")
        assert result.returncode == 1, result.stdout
        changed = [l for l in result.stdout.splitlines() if l[:1] in "+-" and not l.startswith(("+++", "---"))]
        assert [l[0] for l in changed] == ["-", "+"] and "mhlo.num_partitions = 1" in changed[0] \
            and "mhlo.num_partitions = 2" in changed[1], result.stdout
    # Module attributes without functions, and an attribute that only one side has.
    (tmp_path / "a.mlir").write_text("module attributes {mhlo.num_partitions = 1 : i32} {\n}\n")
    (tmp_path / "b.mlir").write_text("module {\n}\n")
    assert cli("diff", tmp_path / "a.mlir", tmp_path / "b.mlir").returncode == 1
    assert cli("diff", tmp_path / "a.mlir", tmp_path / "b.mlir", "--ignore", "mhlo.num_partitions").returncode == 0


@pytest.mark.subprocess
def test_diff_refuses_input_nested_too_deep_for_the_parser(tmp_path):
    deep = tmp_path / "deep.mlir"
    deep.write_text("module attributes {x.a = " + "[" * 20000 + "]" * 20000 + "} {}\n")
    result = cli("diff", deep, deep)
    assert result.returncode == 2 and result.stderr.startswith(f"pxla-mlir: error: {deep}:1:1025: input nested "
                                                               f"more than 1000 levels deep"), result.stderr


def test_a_pipeline_failure_prints_its_reproducer(monkeypatch, capsys, tmp_path, parse):
    from pxla_mlir.mlir.pass_infra import reproducer, run_pipeline
    from pxla_mlir.tools import cli as cli_module, cmd_emit

    def failing(*args, **kwargs):
        run_pipeline(parse("module attributes {mhlo.num_replicas = 2 : i32} {}"),
                     "builtin.module(pxla-verify-handoff)")

    monkeypatch.setenv("PXLA_REPRO_DIR", str(tmp_path))
    monkeypatch.setattr(cmd_emit, "stage_text", failing)
    assert cli_module.main(["emit", NESTED]) == 2
    err = capsys.readouterr().err.splitlines()
    [saved] = tmp_path.iterdir()
    assert err == ["pxla-mlir: error: -:1:1: error: module has no 'mhlo.num_partitions' attribute; XLA needs "
                   "'mhlo.num_partitions = N : i32' on the module to compile it",
                   f"pxla-mlir: reproduce with: pxla-opt --run-reproducer {saved}"]
    _, recorded = reproducer.split(saved.read_bytes())
    assert recorded is not None
    assert recorded.pipeline == ("builtin.module(pxla-verify-handoff{num-replicas=0 num-partitions=0 "
                                 "sharding-dialect=auto})")


def test_passes_suggests_the_name_spelled_with_hyphens(capsys):
    from pxla_mlir.tools import cli as cli_module

    assert cli_module.main(["passes", "pxla_expand_shard"]) == 2
    assert capsys.readouterr().err == ("pxla-mlir: error: unknown pass or pipeline 'pxla_expand_shard' (run 'pxla-mlir "
                                       "passes'); did you mean 'pxla-expand-shard'?\n")


def test_emit_with_a_failing_pipeline_saves_a_reproducer_pxla_opt_replays(monkeypatch, capsys, tmp_path):
    from pxla_mlir.mlir.cli import pxla_opt
    from pxla_mlir.tools import cli as cli_module

    monkeypatch.setenv("PXLA_REPRO_DIR", str(tmp_path))
    failing = "builtin.module(pxla-verify-handoff{num-replicas=3})"
    assert cli_module.main(["emit", NESTED, "--pipeline", failing]) == 2
    error, rerun = capsys.readouterr().err.splitlines()
    [saved] = tmp_path.iterdir()
    assert rerun == f"pxla-mlir: reproduce with: pxla-opt --run-reproducer {saved}"
    assert pxla_opt.main(["--run-reproducer", str(saved)]) == 1
    replayed = capsys.readouterr().err.splitlines()[0]
    message = "'mhlo.num_replicas' is 1 but 3 was expected"
    assert replayed.split(" error: ", 1)[1] == error.split(" error: ", 2)[2] == message
