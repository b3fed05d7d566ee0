// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-fold-shard-of-unshard)' | filecheck %s

// A residual leaves one pmap and enters the next over the same axis: the
// all-gather-then-slice pair disappears.

// CHECK-LABEL: func.func public @residual
// CHECK-SAME: (%[[X:.*]]: tensor<16x64xf32>)
// CHECK-NOT: pxla.unshard
// CHECK-NOT: pxla.shard
// CHECK: %[[Y:.*]] = mhlo.tanh %[[X]] : tensor<16x64xf32>
// CHECK: return %[[Y]]
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @residual(%x: tensor<16x64xf32>) -> tensor<16x64xf32> {
    %g = mhlo.custom_call @pxla.unshard(%x) {pxla.axis = 0 : i64, pxla.axis_name = "i", pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<16x64xf32>) -> tensor<8x16x64xf32>
    %s = mhlo.custom_call @pxla.shard(%g) {pxla.axis = 0 : i64, pxla.axis_name = "i", pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8x16x64xf32>) -> tensor<16x64xf32>
    %y = mhlo.tanh %s : tensor<16x64xf32>
    return %y : tensor<16x64xf32>
  }
}

// -----

// Two shards of one unshard both fold; the unshard stays while the global
// value is still used.

// CHECK-LABEL: func.func public @still_used
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>)
// CHECK: %[[G:.*]] = mhlo.custom_call @pxla.unshard(%[[X]])
// CHECK-NOT: pxla.shard
// CHECK: %[[A:.*]] = mhlo.add %[[X]], %[[X]]
// CHECK: return %[[A]], %[[G]]
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @still_used(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3x4xf32>) {
    %g = mhlo.custom_call @pxla.unshard(%x) {pxla.axis = 1 : i64, pxla.axis_size = 4 : i64, pxla.stride = 2 : i64} : (tensor<3xf32>) -> tensor<3x4xf32>
    %s1 = mhlo.custom_call @pxla.shard(%g) {pxla.axis = 1 : i64, pxla.axis_size = 4 : i64, pxla.stride = 2 : i64} : (tensor<3x4xf32>) -> tensor<3xf32>
    %s2 = mhlo.custom_call @pxla.shard(%g) {pxla.axis = 1 : i64, pxla.axis_size = 4 : i64, pxla.stride = 2 : i64} : (tensor<3x4xf32>) -> tensor<3xf32>
    %a = mhlo.add %s1, %s2 : tensor<3xf32>
    return %a, %g : tensor<3xf32>, tensor<3x4xf32>
  }
}

// -----

// A different dimension or stride moves data between devices: those pairs
// stay.

// CHECK-LABEL: func.func public @not_inverse
// CHECK: mhlo.custom_call @pxla.unshard
// CHECK-NEXT: mhlo.custom_call @pxla.shard
// CHECK-NEXT: mhlo.custom_call @pxla.unshard
// CHECK-NEXT: mhlo.custom_call @pxla.shard
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @not_inverse(%x: tensor<4x4xf32>, %y: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4xf32>) {
    %g1 = mhlo.custom_call @pxla.unshard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 4 : i64, pxla.stride = 1 : i64} : (tensor<4x4xf32>) -> tensor<4x4x4xf32>
    %s1 = mhlo.custom_call @pxla.shard(%g1) {pxla.axis = 1 : i64, pxla.axis_size = 4 : i64, pxla.stride = 1 : i64} : (tensor<4x4x4xf32>) -> tensor<4x4xf32>
    %g2 = mhlo.custom_call @pxla.unshard(%y) {pxla.axis = 0 : i64, pxla.axis_size = 2 : i64, pxla.stride = 4 : i64} : (tensor<4xf32>) -> tensor<2x4xf32>
    %s2 = mhlo.custom_call @pxla.shard(%g2) {pxla.axis = 0 : i64, pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2x4xf32>) -> tensor<4xf32>
    return %s1, %s2 : tensor<4x4xf32>, tensor<4xf32>
  }
}
