"""A hand-written manual body between pxla.full_to_shard / pxla.shard_to_full,
expanded by the sharding passes of either dialect (GSPMD custom calls, or one
sdy.manual_computation), compiles with XLA's SPMD partitioner on 8 CPU
devices and computes what numpy computes."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
from jax.sharding import Mesh as JaxMesh, NamedSharding, PartitionSpec as P

from pxla_mlir.mlir.pass_infra import run_pipeline
from pxla_mlir.mlir.sharding import AbstractMesh, spec_to_indices
from pxla_mlir.runtime.compile import compile_module

# Mesh x=2, y=4. Each device holds a 4x3 tile of an 8x12 array; the body adds
# the psum of the tiles over 'y' (devices with the same x) and its partition id.
MODULE = """
module @manual attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @main(%arg0: tensor<8x12xf32> {pxla.dims = [["x"], ["y"]]})
      -> (tensor<8x12xf32> {pxla.dims = [["x"], ["y"]]}, tensor<8x3xf32> {pxla.dims = [["x"], []]}) {
    %t = mhlo.custom_call @pxla.full_to_shard(%arg0) {pxla.dims = [["x"], ["y"]]} : (tensor<8x12xf32>) -> tensor<4x3xf32>
    %s = "mhlo.all_reduce"(%t) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>,
        replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %sum = mhlo.add %a, %b : tensor<f32>
      mhlo.return %sum : tensor<f32>
    }) : (tensor<4x3xf32>) -> tensor<4x3xf32>
    %pid = mhlo.partition_id : tensor<ui32>
    %pidf = mhlo.convert %pid : (tensor<ui32>) -> tensor<f32>
    %pidb = "mhlo.broadcast_in_dim"(%pidf) <{broadcast_dimensions = dense<> : tensor<0xi64>}> : (tensor<f32>) -> tensor<4x3xf32>
    %r0 = mhlo.add %t, %s : tensor<4x3xf32>
    %r = mhlo.add %r0, %pidb : tensor<4x3xf32>
    %o1 = mhlo.custom_call @pxla.shard_to_full(%r) {pxla.dims = [["x"], ["y"]]} : (tensor<4x3xf32>) -> tensor<8x12xf32>
    %o2 = mhlo.custom_call @pxla.shard_to_full(%s) {pxla.dims = [["x"], []]} : (tensor<4x3xf32>) -> tensor<8x3xf32>
    return %o1, %o2 : tensor<8x12xf32>, tensor<8x3xf32>
  }
}
"""
PIPELINES = {
    "gspmd": "builtin.module(pxla-expand-manual-sharding,pxla-annotate-shardings,canonicalize,"
             "pxla-verify-handoff{sharding-dialect=gspmd})",
    "sdy": "builtin.module(pxla-add-sdy-mesh,pxla-expand-manual-computation,pxla-annotate-sdy-shardings,canonicalize,"
           "pxla-verify-handoff{sharding-dialect=sdy})",
}


def numpy_reference(x):
    tiles = x.reshape(2, 4, 4, 3)  # [x, row, y, col]
    s = tiles.sum(axis=2, keepdims=True)  # psum over y
    pid = (np.arange(2)[:, None, None, None] * 4 + np.arange(4)[None, None, :, None]).astype(np.float32)
    r = (tiles + s + pid).reshape(8, 12)
    return r, s[:, :, 0, :].reshape(8, 3)


@pytest.mark.parametrize("dialect", list(PIPELINES))
def test_manual_region_matches_numpy(parse, dialect):
    module = parse(MODULE)
    run_pipeline(module, PIPELINES[dialect])
    text = str(module)
    assert "pxla." not in text.replace("pxla.mesh", "")
    if dialect == "gspmd":
        assert text.count("@SPMDFullToShardShape") == 1 and text.count("@SPMDShardToFullShape") == 2
    else:
        assert text.count("sdy.manual_computation") == 1 and "mhlo.sharding" not in text
    devices = jax.devices()[:8]
    exe = compile_module(module, devices)
    x = np.random.default_rng(0).normal(size=(8, 12)).astype(np.float32)
    mesh = JaxMesh(np.array(devices).reshape(2, 4), ("x", "y"))
    arg = jax.device_put(x, NamedSharding(mesh, P("x", "y")))
    outs = exe.execute_sharded([arg]).disassemble_into_single_device_arrays()
    want = numpy_reference(x)
    abstract = AbstractMesh((2, 4), ("x", "y"))
    for pieces, w, mapping in zip(outs, want, ({"x": 0, "y": 1}, {"x": 0})):
        spec = abstract.sharding_spec(2, mapping)
        for device, (piece, idx) in enumerate(zip(pieces, spec_to_indices(w.shape, spec))):
            np.testing.assert_allclose(np.asarray(piece), w[idx], rtol=1e-5, err_msg=f"device {device}")
