# RUN: %python %s | filecheck %s
# One pmap over 8 devices in replica mode: per-device signature with a unit
# mapped dimension, cross-replica collectives, the device index from replica_id;
# in partition mode one manual region, in Shardy's form and in GSPMD's.

import numpy as np
from jax import lax

import pxla_mlir
from pxla_mlir.testing import print_lowering

x = np.zeros((8, 3), np.float32)
w = np.zeros((3,), np.float32)


# CHECK-LABEL: TEST: psum_broadcast
# CHECK: module @pmap_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32
# The per-device signature keeps its record of the global layout (row i of x; w whole on every device).
# CHECK: func.func public @main(%[[X:.*]]: tensor<1x3xf32> {pxla.tile_dims = {{\[\[}}"i"], []]}, %[[W:.*]]: tensor<3xf32> {mhlo.is_same_data_across_replicas = true, pxla.tile_dims = {{\[\[}}]]}) -> (tensor<1x3xf32> {pxla.tile_dims = {{\[\[}}"i"], []]})
# CHECK: %[[R:.*]] = mhlo.reshape %[[X]] : (tensor<1x3xf32>) -> tensor<3xf32>
# CHECK: "mhlo.all_reduce"(%[[R]]) <{replica_groups = dense<{{\[\[}}0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}>
# CHECK-NOT: channel_handle
# CHECK: mhlo.replica_id
# CHECK: return %{{.*}} : tensor<1x3xf32>
def f(x, w):
    return lax.psum(x, "i") * w + lax.axis_index("i")


print_lowering("psum_broadcast", pxla_mlir.pmap(f, "i", in_axes=(0, None)), x, w)

# CHECK-LABEL: TEST: out_axis_1
# CHECK: func.func public @main(%{{.*}}: tensor<1x3xf32> {pxla.tile_dims = {{\[\[}}"i"], []]}) -> (tensor<3x1xf32> {pxla.tile_dims = {{\[\[}}], ["i"]]})
# CHECK: "mhlo.all_gather"({{.*}}) <{all_gather_dim = 0 : i64, replica_groups = dense<{{\[\[}}0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}>
print_lowering("out_axis_1", pxla_mlir.pmap(lambda v: lax.all_gather(v, "i")[0] + v, "i", out_axes=1), x)

# CHECK-LABEL: TEST: partition_mode
# CHECK: module @pmap__lambda attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32
# CHECK-NEXT: sdy.mesh @mesh = <["i"=8]>
# CHECK-NEXT: func.func public @main(%[[X:.*]]: tensor<8x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}, {}]>}) -> (tensor<8x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}, {}]>})
# CHECK-NEXT: sdy.manual_computation(%[[X]]) in_shardings=[<@mesh, [{"i"}, {}]>] out_shardings=[<@mesh, [{"i"}, {}]>] manual_axes={"i"} (%{{.*}}: tensor<1x3xf32>)
# CHECK: func.func private @main_per_device
# CHECK: "mhlo.all_reduce"({{.*}}) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}>
print_lowering("partition_mode", pxla_mlir.pmap(lambda v: lax.psum(v, "i"), "i", mode="partition"), x)

# CHECK-LABEL: TEST: partition_mode_gspmd
# CHECK: module @pmap__lambda attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32
# CHECK: func.func public @main(%{{.*}}: tensor<8x3xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}) -> (tensor<8x3xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"})
# CHECK: @SPMDFullToShardShape
# CHECK: func.func private @main_per_device
# CHECK: "mhlo.all_reduce"({{.*}}) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}>
print_lowering("partition_mode_gspmd", pxla_mlir.pmap(lambda v: lax.psum(v, "i"), "i", mode="partition",
                                                       shardings="gspmd"), x)
