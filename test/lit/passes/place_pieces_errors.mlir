// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-place-pieces)'

// The layout of every value of a pmap with nested pmaps is read from @main's
// boundary: each argument and result needs its pxla.tile_dims.

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=2,_pxla_rep=2"} {
  // expected-error @+1 {{@main's argument 0 has no pxla.tile_dims; pmap's import writes it on every argument and result}}
  func.func public @main(%arg0: tensor<2x8xf32>) -> (tensor<8xf32> {pxla.tile_dims = [[]]}) {
    %0 = mhlo.custom_call @pxla.shard(%arg0) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2x8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=2,_pxla_rep=2"} {
  // expected-error @+1 {{pxla.tile_dims of @main's result has 1 entries, the value has rank 2}}
  func.func public @main(%arg0: tensor<1x8xf32> {pxla.tile_dims = [["i"], []]}) -> (tensor<1x8xf32> {pxla.tile_dims = [["i"]]}) {
    return %arg0 : tensor<1x8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=2,_pxla_rep=2"} {
  // expected-error @+1 {{@main is a declaration; pxla-place-pieces places the values of its body: give @main its definition}}
  func.func private @main(%arg0: tensor<1x2x3xf32>) -> tensor<1x2x3xf32>
}
