// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-place-pieces,pxla-expand-shard)'

// A placeholder whose axis or shapes do not fit its value is left as it is
// by pxla-place-pieces (no rewrite may build ops of the wrong shape from it):
// pxla-expand-shard reports it.

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=2,_pxla_rep=2"} {
  func.func public @main(%arg0: tensor<1x2x3xf32> {pxla.tile_dims = [["i"], [], []]}) -> (tensor<1x3xf32> {pxla.tile_dims = [["i"], []]}) {
    %0 = mhlo.reshape %arg0 : (tensor<1x2x3xf32>) -> tensor<2x3xf32>
    // expected-error @+1 {{@pxla.shard: pxla.axis = 7 is out of range for a rank-2 value}}
    %1 = mhlo.custom_call @pxla.shard(%0) {pxla.axis = 7 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
    %2 = mhlo.negate %1 : tensor<3xf32>
    %3 = mhlo.reshape %2 : (tensor<3xf32>) -> tensor<1x3xf32>
    return %3 : tensor<1x3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=2,_pxla_rep=2"} {
  func.func public @main(%arg0: tensor<1x2x3xf32> {pxla.tile_dims = [["i"], [], []]}) -> (tensor<1x2xf32> {pxla.tile_dims = [["i"], []]}) {
    %0 = mhlo.reshape %arg0 : (tensor<1x2x3xf32>) -> tensor<2x3xf32>
    // expected-error @+1 {{@pxla.shard: the result must be the operand without dimension 0: shape [3], got [2]}}
    %1 = mhlo.custom_call @pxla.shard(%0) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2x3xf32>) -> tensor<2xf32>
    %2 = mhlo.negate %1 : tensor<2xf32>
    %3 = mhlo.reshape %2 : (tensor<2xf32>) -> tensor<1x2xf32>
    return %3 : tensor<1x2xf32>
  }
}
