"""The Shardy (sdy) and GSPMD forms of pmap's partition mode and xmap's
manual/vectorize lowerings: the Shardy form compiles without XLA's GSPMD
deprecation warning (stderr of a fresh process), the two forms differ only in
their sharding constructs, compiling picks the partitioner from the module,
and the option is validated like the others. (The numbers of both forms are
checked by test_pmap_numerics.py and test_xmap_numerics.py.)"""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import REPO
from isolation import TEST_PATH
from jax import lax

import pxla_mlir
from pxla_mlir.jaxbridge.jax_internals import JAX_VERSION
from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.core.mlir_diff import diff
from pxla_mlir.mlir.core.shardy import uses_shardy
from pxla_mlir.runtime import compile as runtime_compile

sys.path.insert(0, str(REPO))
from examples.nested_reduction import two_level_sum
from examples.train_step import train_step
from examples.xmap_2d import normalise_2d

TRAIN_ARGS = [np.ones(s, np.float32) for s in [(16, 32), (32,), (32, 4), (8, 16, 16), (8, 16, 4)]]
NESTED_ARGS = [np.ones((2, 4, 128), np.float32)]
XMAP_ARGS = [np.ones((8, 16), np.float32)]


def lowerings(shardings: str):
    """name -> (mapped function, arguments, mesh or None): every lowering the option changes."""
    return {
        "pmap-partition": (train_step.with_options(mode="partition", shardings=shardings), TRAIN_ARGS, None),
        "nested-pmap-partition": (two_level_sum.with_options(mode="partition", shardings=shardings), NESTED_ARGS,
                                  None),
        "xmap-manual": (normalise_2d.with_options(lowering="manual", shardings=shardings), XMAP_ARGS, (2, 4)),
        "xmap-vectorize": (normalise_2d.with_options(lowering="vectorize", shardings=shardings), XMAP_ARGS, (2, 4)),
    }


def lower(fn, args, mesh):
    if mesh is None:
        return fn.lower(*args)
    with pxla_mlir.Mesh.create(dict(zip(("x", "y"), mesh))):
        return fn.lower(*args)


# -- stderr of the compiles ----------------------------------------------------------------

CHILD = """
import os
import sys
sys.path[:0] = [sys.argv[1], *sys.argv[3].split(os.pathsep)]
import jax
from test_shardy_form import lowerings, lower
for name, (fn, args, mesh) in lowerings(sys.argv[2]).items():
    print("@@ " + name, file=sys.stderr, flush=True)
    compiled = lower(fn, args, mesh).compile()
    jax.block_until_ready(compiled(*args))
print("@@ end", file=sys.stderr, flush=True)
"""


def compile_in_a_fresh_process(shardings: str) -> dict[str, str]:
    """stderr of compiling and running each lowering once, by lowering."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # pxla_mlir's own default
    proc = subprocess.run([sys.executable, "-c", CHILD, str(REPO), shardings, TEST_PATH], capture_output=True, text=True,
                          env=env, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    chunks = re.split(r"^@@ (\S+)\n", proc.stderr, flags=re.M)
    assert chunks[0] == "", chunks[0]  # nothing before the first compile (imports are quiet)
    by_case = dict(zip(chunks[1::2], chunks[2::2]))
    assert list(by_case) == [*lowerings(shardings), "end"]
    return by_case


GSPMD_WARNING = "GSPMD sharding propagation is going to be deprecated"


@pytest.mark.subprocess
def test_the_shardy_form_compiles_without_warnings():
    for name, err in compile_in_a_fresh_process("sdy").items():
        assert err == "", f"{name}: {err}"


@pytest.mark.subprocess
@pytest.mark.slow
def test_the_gspmd_form_is_warned_about():
    """Why Shardy is the default: jaxlib 0.10 warns on each GSPMD compile, 0.11+ on the first of a process."""
    by_case = compile_in_a_fresh_process("gspmd")
    assert by_case.pop("end") == ""
    counts = [err.count(GSPMD_WARNING) for err in by_case.values()]
    assert counts == ([1] * len(counts) if JAX_VERSION < (0, 11) else [1] + [0] * (len(counts) - 1)), by_case


# -- the two forms differ only in sharding constructs -----------------------------------------

SHARDING_CONSTRUCT = re.compile(r"sdy\.|mhlo\.sharding|@Sharding|@SPMD(FullToShard|ShardToFull)Shape")


@pytest.mark.parametrize("name", list(lowerings("sdy")))
def test_diff_of_the_two_forms_shows_only_sharding_constructs(name):
    fn, args, mesh = lowerings("sdy")[name]
    sdy = lower(fn, args, mesh).as_text()
    gspmd = lower(fn.with_options(shardings="gspmd"), args, mesh).as_text()
    out = diff(gspmd, sdy, a_name="gspmd", b_name="sdy")
    changed = [line[1:] for line in out.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed
    # Every changed line is a sharding construct, the end of the manual region (its types), or the
    # call/return of @main that the region wraps (renamed, re-indented).
    others = [line for line in changed if not SHARDING_CONSTRUCT.search(line)]
    allowed = re.compile(r"^\s+(%\w+(:\d+)? = (func\.)?call @main_per_device\(|return %|\} : \()")
    assert all(allowed.search(line) for line in others), others
    assert any("sdy.manual_computation" in line for line in changed) == ("vectorize" not in name)
    # Outside @main nothing differs: the per-device program and module attributes are the same.
    assert functions_but_main(sdy) == functions_but_main(gspmd)


def functions_but_main(text: str) -> list[str]:
    from jaxlib.mlir import ir

    from pxla_mlir.mlir.core.context import make_context

    with make_context():
        module = ir.Module.parse(text)
        attrs = sorted(f"{name} = {module.operation.attributes[name]}" for name in module.operation.attributes)
        return attrs + [str(f) for f in ir_utils.functions(module.operation) if ir_utils.symbol_name(f) != "main"]


@pytest.mark.subprocess
@pytest.mark.slow
def test_pxla_mlir_diff_of_the_two_forms(tmp_path):
    spec = str(REPO / "examples/xmap_2d.py") + ":normalise_2d?lowering=manual"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    proc = subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", "diff", spec + "&shardings=gspmd", spec],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    changed = [l for l in proc.stdout.splitlines() if l[:1] in "+-" and not l.startswith(("+++", "---"))]
    assert any("@SPMDFullToShardShape" in l for l in changed if l.startswith("-"))
    assert any("sdy.manual_computation" in l for l in changed if l.startswith("+"))
    assert not any("all_reduce" in l or "mhlo.reduce" in l for l in changed)


# -- compiling follows the form ------------------------------------------------------------------

def test_compile_options_follow_the_module(monkeypatch):
    seen = []
    original = runtime_compile.compile_options

    def spy(*args, **kwargs):
        seen.append((kwargs["spmd"], kwargs["shardy"]))
        return original(*args, **kwargs)

    monkeypatch.setattr(runtime_compile, "compile_options", spy)
    x = np.arange(16, dtype=np.float32).reshape(8, 2)
    for mode, shardings in (("partition", "sdy"), ("partition", "gspmd"), ("replica", "sdy")):
        f = pxla_mlir.pmap(lambda v: lax.psum(v, "i"), "i", mode=mode, shardings=shardings)
        lowered = f.lower(x)
        assert uses_shardy(lowered.mhlo().operation) == (mode == "partition" and shardings == "sdy")
        np.testing.assert_array_equal(np.asarray(lowered.compile()(x)), np.tile(x.sum(0), (8, 1)))
    assert seen == [(True, True), (True, False), (False, False)]


def test_an_sdy_module_compiled_without_shardy_fails_cleanly():
    """Why the flag must follow the form (checked once, against jaxlib)."""
    from pxla_mlir.jaxbridge.executables import compile_and_load
    from pxla_mlir.runtime.compile import compile_options

    f = pxla_mlir.pmap(lambda v: lax.psum(v, "i"), "i", mode="partition")
    lowered = f.lower(np.ones((8, 2), np.float32))
    opts = compile_options(1, 8, np.arange(8).reshape(1, 8), spmd=True, shardy=False)
    # jaxlib 0.10 names the flag; 0.11+ fails in the partitioner on Shardy's exported region.
    with pytest.raises(Exception, match="Shardy" if JAX_VERSION < (0, 11) else "Unexpected custom call named 'xla.sdy"):
        compile_and_load(lowered.as_text(), lowered.devices, opts)


# -- the option ---------------------------------------------------------------------------------

def test_option_is_validated_and_named_as_the_api_names_it():
    with pytest.raises(ValueError, match="shardings must be 'gspmd' or 'sdy', got 'shardy'"):
        pxla_mlir.pmap(lambda v: v, "i", shardings="shardy")
    with pytest.raises(ValueError, match="shardings must be 'gspmd' or 'sdy', got 'GSPMD'"):
        pxla_mlir.xmap(lambda v: v, ["i", ...], ["i", ...], shardings="GSPMD")
    with pytest.raises(ValueError, match="shardings must be"):
        pxla_mlir.jit(lambda v: v, shardings="mhlo")
    f = pxla_mlir.pmap(lambda v: v * 2, "i", mode="partition").with_options(shardings="gspmd")
    lowered = f.lower(np.ones((8, 2), np.float32))
    assert lowered.pipeline.startswith("builtin.module(pxla-pmap-pipeline{") and \
        "sharding-dialect=gspmd" in lowered.pipeline.split("{", 1)[1].rstrip("})").split()
    assert "mhlo.sharding" in lowered.as_text() and "sdy" not in lowered.as_text()


def test_default_is_shardy():
    f = pxla_mlir.pmap(lambda v: v * 2, "i", mode="partition")
    text = f.lower(np.ones((8, 2), np.float32)).as_text()
    assert "sdy.mesh @mesh = <[\"i\"=8]>" in text and "mhlo.sharding" not in text


# -- one partition --------------------------------------------------------------------------

def _one_device_maps():
    """name -> thunk: every Shardy-form map on one device (XLA compiles it without its SPMD partitioner)."""
    import jax

    d = jax.devices()[:1]
    x = np.arange(12, dtype=np.float32).reshape(1, 12)

    def body(v):
        return lax.psum(v, "i") * 2 + lax.axis_index("i")

    def with_callback(v):  # host callbacks compile from the ir.Module, as jax hands modules over
        jax.debug.callback(lambda u: None, v)
        return body(v)

    def xmap_manual():
        xm = pxla_mlir.xmap(lambda a: a * 2 + lax.psum(a, "b"), in_axes=["b", ...], out_axes=["b", ...],
                            axis_resources={"b": "x"}, lowering="manual")
        with pxla_mlir.Mesh.create({"x": 1}):
            return xm(np.ones((1, 4), np.float32)), np.full((1, 4), 3.0, np.float32)

    want = 2 * x  # psum over one device, axis_index 0
    nested = pxla_mlir.pmap(pxla_mlir.pmap(lambda r: lax.psum(r, "j") + lax.psum(r, "i"), "j", mode="partition"), "i",
                            mode="partition", devices=d)
    return {
        "pmap": lambda: (pxla_mlir.pmap(body, "i", mode="partition", devices=d)(x), want),
        "pmap-callback": lambda: (pxla_mlir.pmap(with_callback, "i", mode="partition", devices=d)(x), want),
        "nested-pmap": lambda: (nested(x.reshape(1, 1, 12)), 2 * x.reshape(1, 1, 12)),
        "xmap-manual": xmap_manual,
    }


@pytest.mark.parametrize("name", ["pmap", "pmap-callback", "nested-pmap", "xmap-manual"])
def test_one_partition_modules_hold_no_manual_region_and_run(name):
    """jax's shard_map lowering emits no sdy.manual_computation when its manual
    axes have size 1; with mhlo.num_partitions = 1 XLA runs no partitioner to
    take one apart, and the exported @xla.sdy.GlobalToLocalShape reaches the
    backend (TPU at every compile; CPU when the module is handed over as an
    ir.Module, as it is with host callbacks)."""
    out, want = _one_device_maps()[name]()
    np.testing.assert_array_equal(np.asarray(out), want)


def test_one_partition_lowering_is_jaxs():
    import jax
    from jax.sharding import Mesh, PartitionSpec as P

    d = jax.devices()[:1]
    x = np.arange(12, dtype=np.float32).reshape(1, 12)

    def body(v):
        return lax.psum(v, "i") * 2

    text = pxla_mlir.pmap(body, "i", mode="partition", devices=d).lower(x).as_text()
    assert "sdy.manual_computation" not in text and "call @main_per_device(%arg0)" in text
    theirs = jax.jit(jax.shard_map(body, mesh=Mesh(np.array(d), ("i",)), in_specs=P("i"), out_specs=P("i")))
    assert "sdy.manual_computation" not in theirs.lower(x).as_text()
    # with two partitions both keep the region
    two = pxla_mlir.pmap(body, "i", mode="partition", devices=jax.devices()[:2]).lower(np.ones((2, 12), np.float32))
    assert "sdy.manual_computation" in two.as_text()
