// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-place-tiles)'

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  // expected-error @+1 {{argument 0: pxla.tile_dims must be an array of arrays of mesh axis names}}
  func.func public @main(%arg0: tensor<16xf32> {pxla.tile_dims = "x"}) -> tensor<16xf32> {
    return %arg0 : tensor<16xf32>
  }
}

// -----

// expected-error @+1 {{bad pxla.mesh 'x:8': expected comma-separated name=size}}
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x:8"} {
  func.func public @main(%arg0: tensor<16xf32> {pxla.tile_dims = [[]]}) -> tensor<16xf32> {
    return %arg0 : tensor<16xf32>
  }
}

// -----

// No @main, no pxla.mesh: nothing to place, nothing reported.
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @other(%arg0: tensor<16xf32>) -> tensor<16xf32> {
    return %arg0 : tensor<16xf32>
  }
}
