// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-expand-shard)' | filecheck %s

// Axis j (size 4, stride 2) of an 8-device module: index (pid / 2) % 4.

// CHECK-LABEL: func.func public @middle_axis
// CHECK-SAME: (%[[X:.*]]: tensor<3x4x5xf32>)
// CHECK: %[[PID:.*]] = mhlo.partition_id : tensor<ui32>
// CHECK: %[[STRIDE:.*]] = mhlo.constant dense<2> : tensor<ui32>
// CHECK: %[[Q:.*]] = mhlo.divide %[[PID]], %[[STRIDE]] : tensor<ui32>
// CHECK: %[[SIZE:.*]] = mhlo.constant dense<4> : tensor<ui32>
// CHECK: %[[R:.*]] = mhlo.remainder %[[Q]], %[[SIZE]] : tensor<ui32>
// CHECK: %[[I:.*]] = mhlo.convert %[[R]] : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[Z:.*]] = mhlo.constant dense<0> : tensor<i32>
// CHECK: %[[D:.*]] = "mhlo.dynamic_slice"(%[[X]], %[[Z]], %[[I]], %[[Z]]) <{slice_sizes = dense<[3, 1, 5]> : tensor<3xi64>}> : (tensor<3x4x5xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<3x1x5xf32>
// CHECK: %[[S:.*]] = mhlo.reshape %[[D]] : (tensor<3x1x5xf32>) -> tensor<3x5xf32>
// CHECK: return %[[S]]
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @middle_axis(%x: tensor<3x4x5xf32>) -> tensor<3x5xf32> {
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 1 : i64, pxla.axis_name = "j", pxla.axis_size = 4 : i64, pxla.stride = 2 : i64} : (tensor<3x4x5xf32>) -> tensor<3x5xf32>
    return %0 : tensor<3x5xf32>
  }
}

// -----

// Stride 1 needs no division; a 1-d operand becomes a scalar.

// CHECK-LABEL: func.func public @innermost
// CHECK-SAME: (%[[X:.*]]: tensor<8xi32>)
// CHECK: %[[PID:.*]] = mhlo.partition_id
// CHECK-NOT: mhlo.divide
// CHECK: %[[SIZE:.*]] = mhlo.constant dense<8> : tensor<ui32>
// CHECK-NOT: mhlo.divide
// CHECK: %[[R:.*]] = mhlo.remainder %[[PID]], %[[SIZE]] : tensor<ui32>
// CHECK: %[[I:.*]] = mhlo.convert %[[R]] : (tensor<ui32>) -> tensor<i32>
// CHECK: %[[D:.*]] = "mhlo.dynamic_slice"(%[[X]], %[[I]]) <{slice_sizes = dense<1> : tensor<1xi64>}> : (tensor<8xi32>, tensor<i32>) -> tensor<1xi32>
// CHECK: mhlo.reshape %[[D]] : (tensor<1xi32>) -> tensor<i32>
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @innermost(%x: tensor<8xi32>) -> tensor<i32> {
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8xi32>) -> tensor<i32>
    return %0 : tensor<i32>
  }
}
