# RUN: %python %s | filecheck %s
# One xmap on a 2x4 mesh ('m' -> x, 'n' -> y, tiles 2x2) in the three
# lowerings: vectorize (global view + sdy.sharding, or mhlo.sharding), manual
# (one sdy.manual_computation, or a region between @SPMDFullToShardShape and
# @SPMDShardToFullShape), replica (per-device tiles, cross-replica groups of
# the mesh axes).

import numpy as np
from jax import lax

import pxla_mlir
from pxla_mlir.testing import print_lowering


def f(b):
    return lax.psum(b, "n") + lax.axis_index("m")


b = np.zeros((4, 8, 3), np.float32)
with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
    def xm(lowering, shardings="sdy"):
        return pxla_mlir.xmap(f, {0: "m", 1: "n"}, {0: "m", 1: "n"}, axis_resources={"m": "x", "n": "y"},
                              lowering=lowering, shardings=shardings)

    # CHECK-LABEL: TEST: vectorize
    # CHECK: mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32
    # CHECK-NEXT: sdy.mesh @mesh = <["x"=2, "y"=4]>
    # CHECK-NEXT: func.func public @main(%{{.*}}: tensor<4x8x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>}) -> (tensor<4x8x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>})
    # CHECK: mhlo.reduce
    # CHECK-NOT: mhlo.all_reduce
    # CHECK-NOT: manual_computation
    print_lowering("vectorize", xm("vectorize"), b)

    # CHECK-LABEL: TEST: manual
    # CHECK: func.func public @main(%[[A:.*]]: tensor<4x8x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>})
    # CHECK-NEXT: sdy.manual_computation(%[[A]]) in_shardings=[<@mesh, [{"x"}, {"y"}, {}]>] out_shardings=[<@mesh, [{"x"}, {"y"}, {}]>] manual_axes={"x", "y"} (%[[T:.*]]: tensor<2x2x3xf32>)
    # CHECK-NEXT: func.call @main_per_device(%[[T]])
    # CHECK-NEXT: sdy.return
    # CHECK: func.func private @main_per_device(%{{.*}}: tensor<2x2x3xf32>)
    # CHECK: "mhlo.all_reduce"({{.*}}) <{channel_handle = {{.*}}, replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}>
    # CHECK: mhlo.partition_id
    print_lowering("manual", xm("manual"), b)

    # CHECK-LABEL: TEST: vectorize_gspmd
    # CHECK: func.func public @main(%{{.*}}: tensor<4x8x3xf32> {mhlo.sharding = "{devices=[2,4,1]<=[8]}"}) -> (tensor<4x8x3xf32> {mhlo.sharding = "{devices=[2,4,1]<=[8]}"})
    # CHECK-NOT: SPMDFullToShardShape
    print_lowering("vectorize_gspmd", xm("vectorize", "gspmd"), b)

    # CHECK-LABEL: TEST: manual_gspmd
    # CHECK: func.func public @main(%[[A:.*]]: tensor<4x8x3xf32> {mhlo.sharding = "{devices=[2,4,1]<=[8]}"})
    # CHECK: mhlo.custom_call @Sharding(%[[A]]) {mhlo.sharding = "{devices=[2,4,1]<=[8]}"}
    # CHECK-NEXT: mhlo.custom_call @SPMDFullToShardShape({{.*}}) {mhlo.sharding = "{manual}"} : (tensor<4x8x3xf32>) -> tensor<2x2x3xf32>
    # CHECK: call @main_per_device
    # CHECK: @SPMDShardToFullShape({{.*}}) {mhlo.sharding = "{devices=[2,4,1]<=[8]}"} : (tensor<2x2x3xf32>) -> tensor<4x8x3xf32>
    # CHECK: func.func private @main_per_device(%{{.*}}: tensor<2x2x3xf32>)
    # Local part of psum 'n': a reduce over the tile; device part: an all_reduce over y.
    # CHECK: mhlo.reduce
    # CHECK: "mhlo.all_reduce"({{.*}}) <{channel_handle = {{.*}}, replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}>
    # CHECK: mhlo.partition_id
    print_lowering("manual_gspmd", xm("manual", "gspmd"), b)

    # CHECK-LABEL: TEST: replica
    # CHECK: mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32
    # CHECK: func.func public @main(%{{.*}}: tensor<2x2x3xf32> {pxla.tile_dims = {{\[\[}}"x"], ["y"], []]}) -> (tensor<2x2x3xf32> {pxla.tile_dims = {{\[\[}}"x"], ["y"], []]})
    # CHECK: "mhlo.all_reduce"({{.*}}) <{replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}>
    # CHECK: mhlo.replica_id
    # CHECK-NOT: SPMD
    print_lowering("replica", xm("replica"), b)

# Two mesh axes for one named axis, minor first ('y', 'x'): the device order
# in the sharding string and in the replica groups follows the resources.
g = lambda a: lax.psum(a, "batch")  # noqa: E731
a = np.zeros((16, 3), np.float32)
with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
    # CHECK-LABEL: TEST: yx_vectorize
    # CHECK: {sdy.sharding = #sdy.sharding<@mesh, [{"y", "x"}, {}]>}
    print_lowering("yx_vectorize", pxla_mlir.xmap(g, ["batch", ...], {}, axis_resources={"batch": ("y", "x")},
                                                  lowering="vectorize"), a)
    # CHECK-LABEL: TEST: yx_vectorize_gspmd
    # CHECK: {mhlo.sharding = "{devices=[8,1]<=[2,4]T(1,0)}"}
    print_lowering("yx_vectorize_gspmd", pxla_mlir.xmap(g, ["batch", ...], {}, axis_resources={"batch": ("y", "x")},
                                                        lowering="vectorize", shardings="gspmd"), a)
    # CHECK-LABEL: TEST: yx_replica
    # CHECK: "mhlo.all_reduce"({{.*}}replica_groups = dense<{{\[\[}}0, 4, 1, 5, 2, 6, 3, 7]]> : tensor<1x8xi64>
    print_lowering("yx_replica", pxla_mlir.xmap(g, ["batch", ...], {}, axis_resources={"batch": ("y", "x")}), a)
