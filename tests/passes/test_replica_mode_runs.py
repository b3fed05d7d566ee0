"""pxla-convert-to-replica-mode on jax's own per-device lowering compiles and
runs through jaxlib on 8 CPU devices with the numbers of a jax.vmap reference."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jaxlib.mlir import ir

from pxla_mlir.jaxbridge import stablehlo_lowering
from pxla_mlir.mlir.pass_infra import run_pipeline
from pxla_mlir.runtime.compile import compile_module


def one_axis(x):
    n = 8
    return (lax.psum(x, "i") + lax.axis_index("i"),
            lax.all_gather(x, "i"),
            lax.ppermute(x, "i", [(j, (j + 3) % n) for j in range(n)]),
            lax.pmax(x, "i") - lax.pmin(x, "i"),
            lax.all_to_all(x.reshape(8, 1), "i", 0, 0, tiled=True))


def two_axes(x):  # per-device on a 2x4 mesh ('i' major)
    return (lax.psum(x, "j"), lax.psum(x, "i"), lax.psum(x, ("i", "j")),
            lax.axis_index("i") * 10 + lax.axis_index("j"), lax.all_gather(x, "i", tiled=True))


def run_replicas(fn, axes, x_global, ctx):
    names, sizes = zip(*axes)
    n = int(np.prod(sizes))
    shard = x_global.reshape(n, *x_global.shape[len(sizes):])
    closed = jax.make_jaxpr(fn, axis_env=list(axes))(shard[0])
    jax_module = stablehlo_lowering.lower_per_device(closed, names, sizes).module
    with ctx:
        module = ir.Module.parse(jax_module.operation.get_asm())
    run_pipeline(module, "builtin.module(pxla-handoff-pipeline{mode=replica})")
    assert f'mhlo.num_replicas = {n:d}' in str(module) and "partition_id" not in str(module)
    devices = jax.devices()[:n]
    exe = compile_module(module, devices)
    arr = jax.device_put(shard.reshape(n * shard.shape[1], *shard.shape[2:]),
                         NamedSharding(Mesh(np.array(devices), ("d",)), P("d")))
    outs = exe.execute_sharded([arr]).disassemble_into_single_device_arrays()
    return [np.stack([np.asarray(a) for a in per_out]) for per_out in outs]


def test_one_axis_of_eight(ctx):
    x = np.arange(8 * 8, dtype=np.float32).reshape(8, 8) ** 1.5
    got = run_replicas(one_axis, [("i", 8)], x, ctx)
    want = jax.vmap(one_axis, axis_name="i")(x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-6)


def test_two_axes_groups(ctx):
    x = np.random.default_rng(0).normal(size=(2, 4, 3)).astype(np.float32)
    got = run_replicas(two_axes, [("i", 2), ("j", 4)], x, ctx)
    want = jax.vmap(jax.vmap(two_axes, axis_name="j"), axis_name="i")(x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w).reshape(g.shape), rtol=1e-5)
