"""Modules from text run on the devices (pxla_mlir.load, pxla-mlir run FILE.mlir):
jax's own StableHLO gives exactly what jax gives, an emitted map's module takes
exactly the map's inputs and gives exactly its outputs, a module that records no
layout takes stacked per-device values, and what jaxlib cannot run is refused
before it sees it."""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO
from isolation import run_isolated
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import pxla_mlir
from pxla_mlir.stages.text_module import ModuleError
from pxla_mlir.tools.comparing import compare


def assert_exact(got, want):
    """Same count, shapes, dtypes and bytes (signed zeros and NaNs included)."""
    got, want = list(got), list(jax.tree.leaves(want))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert (g.shape, g.dtype) == (w.shape, w.dtype)
        assert g.tobytes() == w.tobytes(), np.abs(g.astype(np.float64) - w.astype(np.float64)).max()


def rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


MESH = Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))


def _jit_sharded():
    f = jax.jit(lambda a, b: (jnp.sin(a) @ b, a.sum(), (a > 0).astype(jnp.int32).sum(0)),
                in_shardings=(NamedSharding(MESH, P("x", "y")), NamedSharding(MESH, P("y", None))))
    return f, (rand(8, 16), rand(16, 4, seed=1))


def _shard_map():
    body = lambda a: (lax.psum(a, "y"), lax.axis_index("x") + 0 * a[:1, :1].astype(jnp.int32))  # noqa: E731
    f = jax.jit(jax.shard_map(body, mesh=MESH, in_specs=P("x", "y"), out_specs=(P("x"), P("x", "y"))))
    return f, (rand(8, 16),)


@contextlib.contextmanager
def rgv3_off():
    """jax's collectives with device groups (jax 0.10 has nothing else)."""
    if not hasattr(jax.config, "jax_use_rgv3"):
        yield
        return
    before = jax.config.jax_use_rgv3
    jax.config.update("jax_use_rgv3", False)
    try:
        yield
    finally:
        jax.config.update("jax_use_rgv3", before)


@pytest.mark.skipif(not hasattr(jax.config, "jax_use_rgv3"), reason="jax 0.10 writes device groups only")
def test_collective_groups_named_by_mesh_axes_say_how_to_lower_instead():
    f, args = _shard_map()
    with pytest.raises(Exception, match=r"replica_group_mesh_axes.*jax.config.update\('jax_use_rgv3', False\)"):
        pxla_mlir.load(f.lower(*args).as_text())


def _one_device():
    return jax.jit(lambda a, n: (jnp.cumsum(a), -a * 0.0, n * 3)), (rand(5), np.arange(4, dtype=np.int32))


@pytest.mark.parametrize("make", [_jit_sharded, _shard_map, _one_device])
def test_jax_stablehlo_gives_exactly_what_jax_gives(make):
    f, args = make()
    with rgv3_off():  # jax 0.11+ names collective groups by mesh axes under Shardy, which load does not read
        text = f.lower(*args).as_text()
    lowered = pxla_mlir.load(text)
    assert lowered.pipeline.startswith("builtin.module(pxla-handoff-pipeline{mode=partition}")
    assert [a.shape for a in lowered.layout.in_avals] == [a.shape for a in args]
    assert_exact(lowered.compile()(*args), f(*args))


def test_a_loaded_module_has_the_aot_api():
    f, args = _jit_sharded()
    lowered = pxla_mlir.load(f.lower(*args).as_text())
    assert lowered.cost_analysis()["flops"] > 0
    assert "stablehlo.sine" in lowered.as_text("stablehlo") and "sine" in lowered.as_text("hlo")
    assert "mhlo.sine" in lowered.as_text() and "stablehlo.sine" in lowered.pxla_text()
    assert lowered.in_shardings == (None, None)  # XLA decides; the executable says
    compiled = lowered.compile()
    assert [s.shard_shape(a.shape) for s, a in zip(compiled.input_shardings[0], args)] == [(4, 4), (4, 4)]
    assert compiled.cost_analysis()["flops"] > 0 and "HloModule" in compiled.as_text()
    assert compiled.args_info[0][1].shape == (16, 4)


def test_gspmd_stablehlo_gives_exactly_what_jax_gives():
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))
    f = jax.jit(lambda a: (a * 2, jnp.cumsum(a, 0)), in_shardings=NamedSharding(mesh, P("x", "y")),
                out_shardings=(NamedSharding(mesh, P("y")), None))
    x = rand(8, 4)
    jax.config.update("jax_use_shardy_partitioner", False)
    try:
        text, want = f.lower(x).as_text(), f(x)
    finally:
        jax.config.update("jax_use_shardy_partitioner", True)
    assert "mhlo.sharding" in text and "sdy" not in text
    compiled = pxla_mlir.load(text).compile()
    assert_exact(compiled(x), want)
    assert str(compiled.input_shardings[0][0]._to_xla_hlo_sharding(2)) == "{devices=[4,2]<=[8]}"


def _psum_body(v):
    return lax.psum(v, "i") * 2 + lax.axis_index("i"), v[::-1] - lax.pmean(v, "i")


def _nested(block):
    return pxla_mlir.pmap(lambda r: (lax.psum(r, ("i", "j")), r * lax.axis_index("j")), "j", out_axes=(None, 1))(block)


def _maps():
    x8, x24 = rand(8, 3), rand(2, 4, 3, seed=2)
    w = rand(3, seed=3)
    cases = {
        "pmap replica": (pxla_mlir.pmap(_psum_body, "i"), (x8,)),
        "pmap partition sdy": (pxla_mlir.pmap(_psum_body, "i", mode="partition"), (x8,)),
        "pmap partition gspmd": (pxla_mlir.pmap(_psum_body, "i", mode="partition", shardings="gspmd"), (x8,)),
        "pmap broadcast, out_axes None and 1": (
            pxla_mlir.pmap(lambda a, b: (lax.psum(a * b, "i"), a + b), "i", in_axes=(0, None), out_axes=(None, 1)),
            (x8, w)),
        "pmap donating": (pxla_mlir.pmap(lambda a: a + 1, "i", donate_argnums=0), (x8,)),
        "nested pmap all-reduce": (pxla_mlir.pmap(_nested, "i", unshard="all-reduce"), (x24,)),
        "jit of pmaps": (pxla_mlir.jit(lambda a, b: pxla_mlir.pmap(_psum_body, "i")(a)[0] @ b[:, None] + 1),
                         (x8, w)),
    }
    for lowering in ("replica", "manual", "vectorize"):
        xm = pxla_mlir.xmap(lambda b: b - lax.pmean(b, "n") + lax.axis_index("m"), in_axes={0: "m", 1: "n"},
                            out_axes={0: "m", 1: "n"}, axis_resources={"m": "x", "n": "y"}, lowering=lowering)
        cases[f"xmap {lowering}"] = (xm, (rand(4, 8, 3, seed=4),))
    return cases


MAPS = _maps()


@pytest.mark.parametrize("name", list(MAPS))
def test_emitted_module_takes_the_maps_inputs_and_gives_its_outputs(name):
    fn, args = MAPS[name]
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        lowered = fn.lower(*args)
        want = fn(*args)
    loaded = pxla_mlir.load(lowered.as_text())
    assert loaded.pipeline == "builtin.module(pxla-verify-handoff)"
    assert "global values" in loaded.layout_note
    assert [(a.shape, a.dtype) for a in loaded.layout.in_avals] == [(a.shape, a.dtype) for a in lowered.layout.in_avals]
    assert loaded.donated == lowered.donated
    assert_exact(loaded.compile()(*args), want)


@pytest.mark.parametrize("name", ["pmap replica", "xmap vectorize"])
def test_emitted_stablehlo_keeps_the_layout_record(name):
    fn, args = MAPS[name]
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        text = fn.lower(*args).as_text("stablehlo")
        want = fn(*args)
    loaded = pxla_mlir.load(text)
    assert loaded.pipeline.startswith("builtin.module(pxla-handoff-pipeline{mode=partition}")
    assert_exact(loaded.compile()(*args), want)


def _lowered(name):
    fn, args = MAPS[name]
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        return fn, args, fn.lower(*args)


@pytest.mark.parametrize("name", ["pmap replica", "nested pmap all-reduce", "xmap manual"])
def test_pxla_form_runs_through_the_maps_pipeline(name):
    fn, args, lowered = _lowered(name)
    replayed = pxla_mlir.load(lowered.pxla_text(), pipeline=lowered.pipeline)
    assert replayed.as_text() == lowered.as_text()
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        assert_exact(replayed.compile()(*args), fn(*args))


@pytest.mark.parametrize("name", ["pmap replica", "jit of pmaps", "xmap replica", "xmap vectorize"])
def test_pxla_form_takes_its_kinds_default_pipeline(name):
    _, _, lowered = _lowered(name)
    assert pxla_mlir.load(lowered.pxla_text()).as_text() == lowered.as_text()


def test_a_module_that_records_no_layout_takes_stacked_per_device_values():
    loaded = pxla_mlir.load(REPO / "examples" / "per_device_psum.mlir")
    assert loaded.pipeline == "builtin.module(pxla-handoff-pipeline{mode=replica},pxla-add-device-axis)"
    assert "stacked on a leading device axis" in loaded.layout_note
    x = np.arange(12, dtype=np.float32).reshape(4, 3) - 5  # integer-valued: every order of the psum is exact
    total, index = loaded.compile()(x)
    want = np.asarray(lax.erf(jnp.asarray(x.sum(0))))
    assert_exact([total, index], [np.broadcast_to(want, (4, 3)), np.arange(4, dtype=np.int32)])


# -- refused before XLA sees it ------------------------------------------------------------------------

REPLICA_AND_PARTITION = """
module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%a: tensor<4xf32> {mhlo.sharding = "{devices=[4]<=[4]}"}) -> tensor<4xf32> {
    %0 = mhlo.add %a, %a : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""


@pytest.mark.subprocess
def test_replicas_and_partitions_together_are_refused_before_jaxlib_aborts():
    # jaxlib compiles such a module, then aborts the process in IFRT: run where a crash fails only this test.
    out = run_isolated(f"""
        import numpy as np, pxla_mlir
        from pxla_mlir.stages.text_module import ModuleError
        try:
            pxla_mlir.load({REPLICA_AND_PARTITION!r}).compile()(np.zeros(4, np.float32))
        except ModuleError as e:
            print("refused:", e)
    """, timeout=120)
    # pxla-verify-handoff, in the pipeline every loaded module runs, refuses it first (located).
    assert 'refused: <module>:3:3: error: argument 0 of func.func has mhlo.sharding = "{devices=[4]<=[4]}" in a ' \
        "module of 2 replicas" in out and "carries tiled shardings" in out, out


def _module(main: str, replicas: int = 1, partitions: int = 1, body: str = "") -> str:
    return (f"module attributes {{mhlo.num_partitions = {partitions} : i32, mhlo.num_replicas = {replicas} : i32}} "
            f"{{\n  {main} {{\n{body}  }}\n}}\n")


@pytest.mark.parametrize("text, message", [
    (_module("func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32>", replicas=16,
             body="    return %a : tensor<3xf32>\n"),
     "the module needs 16 devices (num_replicas = 16, num_partitions = 1), but only 8 CPU devices exist"),
    (_module("func.func public @main(%t: !mhlo.token) -> !mhlo.token", body="    return %t : !mhlo.token\n"),
     "@main's argument 0 is !mhlo.token; only tensors of static shape can be placed on the devices"),
    (_module('func.func public @main(%a: tensor<8xf32> {mhlo.sharding = "{devices=[4]<=[4]}"}) -> tensor<8xf32>',
             partitions=8, body="    return %a : tensor<8xf32>\n"),
     "its tile assignment names 4 devices, not 8"),
    (_module("func.func public @step(%a: tensor<3xf32>) -> tensor<3xf32>", body="    return %a : tensor<3xf32>\n"),
     "the module has no func.func @main"),
    (_module('func.func public @main(%a: tensor<1x3xf32> {pxla.tile_dims = [["i"]]}) -> tensor<1x3xf32> '
             'attributes {pxla.mesh = "i=2"}', replicas=2, body="    return %a : tensor<1x3xf32>\n"),
     "pxla.tile_dims has 1 entries but the @main's argument 0 has rank 2"),
    ("module {\n  func.func @main() {\n    %0 = mhlo.bogus\n", "<module>:3:10: error: custom op 'mhlo.bogus' is unknown"),
    (_module("func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32>",
             body="    %0 = arith.addf %a, %a : tensor<3xf32>\n    return %0 : tensor<3xf32>\n"),
     "'arith.addf' is not builtin/func/mhlo; only builtin, func and mhlo ops"),
    ("HloModule jit_f\n\nENTRY main.1 {\n  ROOT p = f32[4] parameter(0)\n}\n",
     "<module>:1:1: error: this is XLA's HLO text, not an MLIR module"),
])
def test_what_cannot_run_is_one_clear_error(text, message):
    with pytest.raises(ModuleError) as e:
        pxla_mlir.load(text).compile()
    assert message in str(e.value) and "\n" not in str(e.value)


def test_host_callbacks_are_refused():
    f = pxla_mlir.pmap(lambda v: (jax.debug.print("{v}", v=v), v * 2)[1], "i")
    with pytest.raises(ModuleError, match="calls back to Python .custom call @xla_ffi_python_cpu_callback"):
        pxla_mlir.load(f.lower(rand(8)).as_text())


def test_xla_rejection_is_a_module_error(tmp_path):
    path = tmp_path / "m.mlir"
    path.write_text((REPO / "test/lit/Inputs/run_unknown_custom_call.mlir").read_text())
    with pytest.raises(ModuleError, match=r"m.mlir: XLA rejected the module: NOT_FOUND: No registered implementation"):
        pxla_mlir.load(path).compile()


_X64_MODULE = _module("func.func public @main(%x: tensor<4xi64>, %y: tensor<4xf64>) -> (tensor<4xi64>, tensor<4xf64>)",
                      body="    %0 = mhlo.add %x, %x : tensor<4xi64>\n    %1 = mhlo.multiply %y, %y : tensor<4xf64>\n"
                           "    return %0, %1 : tensor<4xi64>, tensor<4xf64>\n")


def test_64_bit_arguments_without_x64_say_to_turn_it_on():
    # jax narrows int64/float64 inputs to 32 bits while jax_enable_x64 is off: a user's setting, not a bug of ours.
    from pxla_mlir.errors import PxlaUserError

    compiled = pxla_mlir.load(_X64_MODULE).compile()
    with pytest.raises(TypeError) as e:
        compiled(np.arange(4, dtype=np.int64), np.ones(4))
    assert isinstance(e.value, PxlaUserError)
    assert "compiled with int64[4] and called with int32[4] (it is args[0] of the call)" in str(e.value)
    assert "jax's 64-bit types are off (jax_enable_x64), so jax turns float64 into float32, int64 into int32 " \
           "before the call; to pass 64-bit values, set JAX_ENABLE_X64=1 in the environment" in str(e.value)
    with pytest.raises(TypeError) as e:  # other mismatches: jax's words only
        compiled(np.arange(3, dtype=np.int64), np.ones(3))
    assert "JAX_ENABLE_X64" not in str(e.value) and isinstance(e.value, PxlaUserError)


@pytest.mark.subprocess
def test_64_bit_module_runs_exactly_with_x64():
    out = run_isolated(f"""
        import os
        os.environ["JAX_ENABLE_X64"] = "1"
        import numpy as np, pxla_mlir
        x, y = np.arange(4, dtype=np.int64) + 2**40, np.linspace(0, 1, 4) + 1e-12
        a, b = pxla_mlir.load({_X64_MODULE!r}).compile()(x, y)
        print(a.dtype, b.dtype, np.array_equal(a, x + x), np.array_equal(b, y * y))
    """, timeout=120)
    assert out.split() == ["int64", "float64", "True", "True"], out


# -- comparing results -------------------------------------------------------------------------------------

def test_compare_floats_within_tolerance_ints_exactly_and_nans_in_place():
    a = np.array([1.0, np.nan, np.inf, -0.0], np.float32)
    (row,) = compare([a], [a.copy()])
    assert row.agrees and row.max_abs == 0
    (row,) = compare([a * np.float32(1 + 2e-7)], [a])  # within rtol 1e-5
    assert row.agrees
    (row,) = compare([np.array([1.0, 2.0, np.inf, 0.0], np.float32)], [a])
    assert not row.agrees and row.why == "NaN at 1 other positions"
    (row,) = compare([np.array([1.1, np.nan, np.inf, 0.0], np.float32)], [a], rtol=0.2)
    assert row.agrees and row.max_abs == pytest.approx(0.1) and row.max_rel == pytest.approx(0.1)
    (row,) = compare([np.array([3, 4], np.int32)], [np.array([3, 5], np.int32)], atol=10)
    assert not row.agrees and row.why == "1 elements differ (compared exactly)" and row.max_abs == 1
    (row,) = compare([np.zeros(3, np.float32)], [np.zeros(3, np.float64)])
    assert not row.agrees and row.why == "float32[3] against float64[3]"
    rows = compare([np.zeros(2)], [np.zeros(2), np.ones(1)])
    assert [r.agrees for r in rows] == [True, False] and rows[1].why == "missing from this run"


# -- the command line, as a user runs it (another directory, the installed command) ----------------

def _cli(*args, cwd, env=None):
    import os
    import subprocess
    import sys

    env = {**{k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}, **(env or {})}  # the CLI sets 8 CPU devices
    return subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


def _cli_body(v, h):
    return lax.psum(v, "i") * 2 - v, (v > 0).sum(dtype=jnp.int32), h * h + lax.pmax(h, "i")


@pytest.mark.subprocess
@pytest.mark.slow
def test_cli_runs_a_module_on_given_inputs_and_writes_what_jax_pmap_gives(tmp_path):
    import ml_dtypes

    x, h = rand(8, 3), rand(8, 2, seed=1).astype(ml_dtypes.bfloat16)
    (tmp_path / "m.mlir").write_text(pxla_mlir.pmap(_cli_body, "i").lower(x, h).as_text())
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "h.npy", h)  # bfloat16: numpy writes raw bytes ('|V2')
    ran = _cli("run", "m.mlir", "--input", "0=x.npy", "--input", "1=h.npy", "-o", "out", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "layout: global values, laid out by pxla.tile_dims" in ran.stderr  # what ran: stderr; results: stdout
    assert ran.stdout.startswith("output[0]: float32[8, 3]") and ran.stderr.startswith("ran m.mlir on 8 CPU devices")
    saved = [np.load(tmp_path / "out" / f"{i}.npy") for i in range(3)]
    saved[2] = saved[2].view(ml_dtypes.bfloat16)
    assert_exact(saved, jax.pmap(_cli_body, "i")(x, h))

    # Exit 0: the saved results again (bfloat16 read back as bfloat16); 1: one of them changed.
    same = _cli("run", "m.mlir", "--input", "0=x.npy", "--input", "1=h.npy", "--expect", "out", cwd=tmp_path)
    assert same.returncode == 0 and "all 3 results agree" in same.stdout, same.stdout + same.stderr
    np.save(tmp_path / "out" / "1.npy", saved[1] + 1)
    moved = _cli("run", "m.mlir", "--input", "0=x.npy", "--input", "1=h.npy", "--expect", "out", cwd=tmp_path)
    assert moved.returncode == 1 and "DIFFER: 8 elements differ (compared exactly)" in moved.stdout, moved.stdout


@pytest.mark.subprocess
@pytest.mark.slow
def test_cli_round_trips_every_extended_float_type(tmp_path):
    import ml_dtypes

    from pxla_mlir.mlir.xla_handoff import ELEMENT_TYPES
    from pxla_mlir.tools.running import save_npy

    names = ["bfloat16", *sorted(n for n in dir(jnp) if n.startswith(("float8_", "float4_")))]  # all jax has
    assert set(names) <= set(ELEMENT_TYPES.values())
    xs = [(np.arange(6, dtype=np.float32).reshape(2, 3) / 4 + 0.25).astype(getattr(ml_dtypes, n)) for n in names]
    (tmp_path / "m.mlir").write_text(jax.jit(lambda *a: [v[::-1] for v in a]).lower(*xs).as_text())
    for i, x in enumerate(xs):
        save_npy(tmp_path / f"x{i}.npy", x)
    given = [f"--input={i}=x{i}.npy" for i in range(len(xs))]
    ran = _cli("run", "m.mlir", *given, "-o", "out", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    for i, x in enumerate(xs):  # numpy.load reads every result (float8_e5m2 was '<f1', which it refuses)
        assert np.load(tmp_path / "out" / f"{i}.npy").view(x.dtype).tobytes() == x[::-1].tobytes(), names[i]
    same = _cli("run", "m.mlir", *given, "--expect", "out", cwd=tmp_path)
    assert same.returncode == 0 and f"all {len(xs)} results agree" in same.stdout, same.stdout + same.stderr
    back = [f"--input={i}=out/{i}.npy" for i in range(len(xs))]  # results read back as inputs
    twice = _cli("run", "m.mlir", *back, "--expect", "out", cwd=tmp_path)
    assert twice.returncode == 1 and f"{len(xs)} of {len(xs)} results differ" in twice.stdout, twice.stdout


@pytest.mark.parametrize("argv, message", [
    (["--input", "0=x.npy"], "argument 0 of m.mlir is f32[8,3], but 'x.npy' holds f64[8,3]"),
    (["--expect", "nowhere"], "cannot read --expect directory 'nowhere': No such file or directory"),
    (["--seed", "x"], "argument --seed: expected an integer >= 0, got 'x'"),
    (["--seed", "-1"], "argument --seed: expected an integer >= 0, got -1"),  # not numpy's message
])
@pytest.mark.subprocess
def test_cli_module_mistakes_exit_2_before_anything_runs(tmp_path, argv, message):
    (tmp_path / "m.mlir").write_text(MAPS["pmap replica"][0].lower(rand(8, 3)).as_text())
    (tmp_path / "broken.mlir").write_text((REPO / "test/lit/Inputs/run_broken.mlir").read_text())
    np.save(tmp_path / "x.npy", np.zeros((8, 3)))
    result = _cli("run", "m.mlir", *argv, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""  # 1 would say that results differ
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"pxla-mlir: error: {message}"), result.stderr


@pytest.mark.parametrize("argv", [["broken.mlir"], ["m.mlir", "--compare", "broken.mlir"]])
@pytest.mark.subprocess
def test_cli_says_a_module_that_does_not_parse_once_with_its_caret(tmp_path, argv):
    (tmp_path / "m.mlir").write_text((REPO / "examples/per_device_psum.mlir").read_text())
    (tmp_path / "broken.mlir").write_text((REPO / "test/lit/Inputs/run_broken.mlir").read_text())
    result = _cli("run", *argv, cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("broken.mlir:4:10: error: custom op 'mhlo.bogus' is unknown\n"  # as pxla-opt says it
                             "    %0 = mhlo.bogus %a\n"
                             "         ^\n")


@pytest.mark.parametrize("dtype", ["c64", "c128"])
def test_random_complex_inputs_have_an_imaginary_part(dtype):
    from pxla_mlir.tools.targets import parse_arg

    value = parse_arg(f"{dtype}[64]").random(np.random.default_rng(0))
    assert value.dtype == np.dtype(parse_arg(f"{dtype}[1]").dtype)
    assert np.count_nonzero(value.imag) == 64 and np.count_nonzero(value.real) == 64


@pytest.mark.subprocess
@pytest.mark.slow
def test_cli_64_bit_module_asks_for_x64_before_compiling_and_then_runs_exactly(tmp_path):
    (tmp_path / "m.mlir").write_text(_X64_MODULE)
    x, y = np.arange(4, dtype=np.int64) + 2**40, np.linspace(0, 1, 4) + 1e-12
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    argv = ("run", "m.mlir", "--input", "0=x.npy", "--input", "1=y.npy", "-o", "out")
    refused = _cli(*argv, cwd=tmp_path, env={"JAX_ENABLE_X64": "0"})
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout + refused.stderr
    assert refused.stderr.splitlines() == [
        "pxla-mlir: error: argument 0 of m.mlir is i64[4], but jax's 64-bit types are off (jax_enable_x64): jax would "
        "pass it as i32[4]; run with JAX_ENABLE_X64=1 in the environment (JAX_ENABLE_X64=1 pxla-mlir run ...) to "
        "pass 64-bit values"], refused.stderr
    ran = _cli(*argv, cwd=tmp_path, env={"JAX_ENABLE_X64": "1"})
    assert ran.returncode == 0, ran.stderr
    a, b = np.load(tmp_path / "out" / "0.npy"), np.load(tmp_path / "out" / "1.npy")
    assert a.dtype == np.int64 and b.dtype == np.float64
    np.testing.assert_array_equal(a, x + x)
    np.testing.assert_array_equal(b, y * y)
