// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-expand-shard)'

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @missing(%x: tensor<8xf32>) -> tensor<f32> {
    // expected-error @+1 {{@pxla.shard needs pxla.stride (integer attributes)}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64} : (tensor<8xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @wrong_size(%x: tensor<6xf32>) -> tensor<f32> {
    // expected-error @+1 {{@pxla.shard: dimension 0 of the operand has size 6, but pxla.axis_size is 8}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<6xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @wrong_result(%x: tensor<4x3xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{the result must be the operand without dimension 0: shape [3], got [4]}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 4 : i64, pxla.stride = 2 : i64} : (tensor<4x3xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @does_not_fit(%x: tensor<4x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{axis 'j' of size 4 with stride 4 does not fit the module's 8 devices}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 4 : i64, pxla.stride = 4 : i64} : (tensor<4x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @axis_out_of_range(%x: tensor<4x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{pxla.axis = 2 is out of range for a rank-2 value}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 2 : i64, pxla.axis_size = 4 : i64, pxla.stride = 1 : i64} : (tensor<4x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
