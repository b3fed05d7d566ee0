// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-fold-shard-of-unshard)'

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @wrong_type(%x: tensor<3xf32>) -> tensor<3xf16> {
    %g = mhlo.custom_call @pxla.unshard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<3xf32>) -> tensor<8x3xf32>
    // expected-error @+1 {{@pxla.shard: it shards an unshard of tensor<3xf32> along the same axis, so its result must be tensor<3xf32>, got tensor<3xf16>}}
    %s = mhlo.custom_call @pxla.shard(%g) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf16>
    return %s : tensor<3xf16>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @missing(%x: tensor<3xf32>) -> tensor<8x3xf32> {
    // expected-error @+1 {{@pxla.unshard needs pxla.axis_size (integer attributes)}}
    %g = mhlo.custom_call @pxla.unshard(%x) {pxla.axis = 0 : i64, pxla.stride = 1 : i64} : (tensor<3xf32>) -> tensor<8x3xf32>
    return %g : tensor<8x3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 6 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @does_not_fit(%x: tensor<4x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{axis 'k' of size 4 with stride 1 does not fit the module's 6 devices}}
    %s = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_name = "k", pxla.axis_size = 4 : i64, pxla.stride = 1 : i64} : (tensor<4x3xf32>) -> tensor<3xf32>
    return %s : tensor<3xf32>
  }
}
