"""pxla-expand-shard / pxla-expand-unshard with a stride other than the axis
size (a nested pmap's outer or middle axis) compile and run on 8 CPU devices
with the numbers numpy computes from the index formula (d / stride) % size."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jaxlib.mlir import ir

from pxla_mlir.mlir.pass_infra import run_pipeline
from pxla_mlir.runtime.compile import compile_module

N = 8
MODULE = """
module attributes {{mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32}} {{
  func.func public @main(%x: tensor<1x{size}x3xf32>, %v: tensor<1x3xf32>) -> (tensor<1x3xf32>, tensor<1x{size}x3xf32>) {{
    %xr = mhlo.reshape %x : (tensor<1x{size}x3xf32>) -> tensor<{size}x3xf32>
    %s = mhlo.custom_call @pxla.shard(%xr) {{pxla.axis = 0 : i64, pxla.axis_size = {size} : i64, pxla.stride = {stride} : i64}} : (tensor<{size}x3xf32>) -> tensor<3xf32>
    %vr = mhlo.reshape %v : (tensor<1x3xf32>) -> tensor<3xf32>
    %u = mhlo.custom_call @pxla.unshard(%vr) {{pxla.axis = 0 : i64, pxla.axis_size = {size} : i64, pxla.stride = {stride} : i64}} : (tensor<3xf32>) -> tensor<{size}x3xf32>
    %s1 = mhlo.reshape %s : (tensor<3xf32>) -> tensor<1x3xf32>
    %u1 = mhlo.reshape %u : (tensor<{size}x3xf32>) -> tensor<1x{size}x3xf32>
    return %s1, %u1 : tensor<1x3xf32>, tensor<1x{size}x3xf32>
  }}
}}
"""


def run_on_devices(module, *per_device_inputs):
    devices = jax.devices()[:N]
    exe = compile_module(module, devices)
    sharding = NamedSharding(Mesh(np.array(devices), ("d",)), P("d"))
    # (devices, 1, ...) -> one global array whose leading dimension splits over the devices
    args = [jax.device_put(a.reshape(N, *a.shape[2:]), sharding) for a in per_device_inputs]
    outs = exe.execute_sharded(args).disassemble_into_single_device_arrays()
    return [np.stack([np.asarray(a)[0] for a in per_out]) for per_out in outs]


@pytest.mark.parametrize("size, stride", [(4, 2), (2, 4), (2, 2), (2, 1), (8, 1)])
@pytest.mark.parametrize("strategy", ["all-gather", "all-reduce"])
def test_strided_shard_and_unshard_compute_numpys_answer(ctx, size, stride, strategy):
    with ctx:
        module = ir.Module.parse(MODULE.format(size=size, stride=stride))
    run_pipeline(module, f"builtin.module(pxla-expand-shard,pxla-expand-unshard{{strategy={strategy}}},"
                         "pxla-convert-to-replica-mode,canonicalize,pxla-verify-handoff)")
    rng = np.random.default_rng(size * 10 + stride)
    x = rng.normal(size=(N, 1, size, 3)).astype(np.float32)  # every device its own value
    v = rng.normal(size=(N, 1, 3)).astype(np.float32)
    shard, unshard = run_on_devices(module, x, v)
    for d in range(N):
        index = (d // stride) % size
        np.testing.assert_array_equal(shard[d], x[d, 0, index])
        base = d - index * stride  # the group member at index 0
        np.testing.assert_array_equal(unshard[d], np.stack([v[base + k * stride, 0] for k in range(size)]))
