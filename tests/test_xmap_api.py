"""xmap's lowered modules: pure, deterministic MHLO; cached calls; outputs
sharded on the mesh as out_axes and axis_resources say."""

import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from jax import lax

import pxla_mlir
from pxla_mlir.ir.ir_utils import walk
from pxla_mlir.stages import STATS


def f(a, w):
    return lax.psum(a * w, "n") + lax.axis_index("m"), lax.pmean(a, ("m", "n"))


ARGS = (np.ones((4, 8, 3), np.float32), np.ones(3, np.float32))


def xm(lowering):
    return pxla_mlir.xmap(f, ({0: "m", 1: "n"}, {}), ({0: "m", 1: "n"}, {}), axis_resources={"m": "x", "n": "y"},
                          lowering=lowering)


@pytest.mark.parametrize("lowering", ["replica", "manual", "vectorize"])
def test_pure_mhlo_and_pipeline(lowering):
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        lowered = xm(lowering).lower(*ARGS)
    assert {op.name.split(".")[0] for op in walk(lowered.mhlo().operation)} == {"builtin", "func", "mhlo"}
    assert lowered.pipeline == f"builtin.module(pxla-xmap-pipeline{{lowering={lowering}}})"


def test_every_lowering_costs_the_same_flops_per_device():
    with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
        costs = {lowering: xm(lowering).lower(*ARGS).compile().cost_analysis()
                 for lowering in ("replica", "manual", "vectorize")}
    assert costs["replica"]["flops"] == costs["manual"]["flops"] == costs["vectorize"]["flops"] > 0
    # The manual region is the replica program inside @SPMDFullToShardShape: the same bytes too.
    assert costs["replica"]["bytes accessed"] == costs["manual"]["bytes accessed"] > 0


def test_cached_calls_and_output_sharding():
    m = pxla_mlir.Mesh.create({"x": 2, "y": 4})
    with m:
        g = xm("replica")
        first = g(*ARGS)
        before = STATS["traces"], STATS["compiles"]
        for _ in range(3):
            again = g(*ARGS)
    assert (STATS["traces"], STATS["compiles"]) == before
    assert again[0].sharding == jax.sharding.NamedSharding(jax.sharding.Mesh(m.devices, ("x", "y")),
                                                           jax.sharding.PartitionSpec("x", "y", None))
    assert again[1].sharding.is_fully_replicated
    np.testing.assert_allclose(np.asarray(first[0]), np.asarray(again[0]))


def test_as_text_is_identical_in_two_processes():
    script = textwrap.dedent("""
        import os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
        import numpy as np, pxla_mlir
        from jax import lax
        f = lambda a: (lax.all_gather(a, "b"), lax.ppermute(a, "b", [(i, (i + 1) % 16) for i in range(16)]))
        with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
            for lowering in ("replica", "manual", "vectorize"):
                g = pxla_mlir.xmap(f, ["b", ...], ({}, ["b", ...]), axis_resources={"b": ("y", "x")},
                                   lowering=lowering)
                print(g.lower(np.ones((16, 2), np.float32)).as_text())
    """)
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
            for _ in range(2)]
    assert runs[0] == runs[1] and runs[0].count("module @") == 3


def test_without_a_mesh_everything_is_vectorized_on_one_device():
    g = pxla_mlir.xmap(lambda a: a - lax.pmean(a, "b"), ["b", ...], ["b", ...])
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = g(x)
    np.testing.assert_allclose(np.asarray(out), x - x.mean(0))
    assert len(out.devices()) == 1
