// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-wrap-manual-main)'

// expected-error @+1 {{no func.func @main to wrap}}
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=8"} {
  func.func public @other() {
    return
  }
}

// -----

// expected-error @+1 {{pxla.mesh has 8 devices; the module must be in partition mode with mhlo.num_partitions = 8 and mhlo.num_replicas = 1}}
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "i=8"} {
  func.func public @main() {
    return
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=8"} {
  // expected-error @+1 {{mesh axis 'j' (mapped to dimension 0 of the argument 0) is not in the mesh; its axes are 'i'}}
  func.func public @main(%x: tensor<1xf32> {pxla.tile_dims = [["j"]]}) -> tensor<1xf32> {
    return %x : tensor<1xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  // expected-error @+1 {{no pxla.mesh on the op or the module}}
  func.func public @main(%x: tensor<1xf32>) -> tensor<1xf32> {
    return %x : tensor<1xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=8"} {
  // expected-error @+1 {{pxla.tile_dims must be an array with one entry per dimension (e.g. [["x"], []]), got 1.500000e+00 : f32}}
  func.func public @main(%x: tensor<1x3xf32> {pxla.tile_dims = 1.5 : f32}) -> tensor<1x3xf32> {
    return %x : tensor<1x3xf32>
  }
}
