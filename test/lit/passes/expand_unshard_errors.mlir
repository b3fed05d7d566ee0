// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-expand-unshard)'

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @wrong_result(%v: tensor<3xf32>) -> tensor<3x4xf32> {
    // expected-error @+1 {{@pxla.unshard: the result must be the operand with dimension 0 of size 4 inserted: shape [4, 3], got [3, 4]}}
    %0 = mhlo.custom_call @pxla.unshard(%v) {pxla.axis = 0 : i64, pxla.axis_size = 4 : i64, pxla.stride = 1 : i64} : (tensor<3xf32>) -> tensor<3x4xf32>
    return %0 : tensor<3x4xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 6 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @does_not_fit(%v: tensor<3xf32>) -> tensor<4x3xf32> {
    // expected-error @+1 {{axis '?' of size 4 with stride 1 does not fit the module's 6 devices}}
    %0 = mhlo.custom_call @pxla.unshard(%v) {pxla.axis = 0 : i64, pxla.axis_size = 4 : i64, pxla.stride = 1 : i64} : (tensor<3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @two_operands(%v: tensor<3xf32>) -> tensor<4x3xf32> {
    // expected-error @+1 {{@pxla.unshard takes one operand and has one result}}
    %0 = mhlo.custom_call @pxla.unshard(%v, %v) {pxla.axis = 0 : i64, pxla.axis_size = 4 : i64, pxla.stride = 1 : i64} : (tensor<3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @channel_of_wrong_kind(%x: tensor<3xf32>) -> tensor<8x3xf32> {
    // expected-error @+1 {{channel_handle must be #mhlo.channel_handle<handle = N, type = T>, got 5 : i64}}
    %c = mhlo.custom_call @foo(%x) {channel_handle = 5 : i64} : (tensor<3xf32>) -> tensor<3xf32>
    %0 = mhlo.custom_call @pxla.unshard(%c) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<3xf32>) -> tensor<8x3xf32>
    return %0 : tensor<8x3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @no_free_channel(%x: tensor<3xf32>) -> tensor<8x3xf32> {
    // expected-error @+1 {{channel handle 9223372036854775807 leaves no room for 1 new handle(s)}}
    %c = "mhlo.collective_permute"(%x) <{channel_handle = #mhlo.channel_handle<handle = 9223372036854775807, type = 1>, source_target_pairs = dense<[[0, 1]]> : tensor<1x2xi64>}> : (tensor<3xf32>) -> tensor<3xf32>
    %0 = mhlo.custom_call @pxla.unshard(%c) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<3xf32>) -> tensor<8x3xf32>
    return %0 : tensor<8x3xf32>
  }
}
