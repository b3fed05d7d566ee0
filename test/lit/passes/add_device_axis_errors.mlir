// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-add-device-axis)'

// expected-error @+1 {{the module runs as 4 partitions; a per-device program needs replica mode first (pxla-convert-to-replica-mode)}}
module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    return %a : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32, pxla.mesh = "i=4"} {
  // expected-error @+1 {{result 0 already has pxla.tile_dims: @main records its layout}}
  func.func public @main(%a: tensor<1x3xf32>) -> (tensor<1x3xf32> {pxla.tile_dims = [["i"], []]}) {
    return %a : tensor<1x3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  // expected-error @+1 {{argument 0 is tensor<?xf32>; a device axis needs a tensor of static shape}}
  func.func public @main(%a: tensor<?xf32>) -> tensor<?xf32> {
    return %a : tensor<?xf32>
  }
}

// -----

// expected-error @+1 {{no func.func @main to give a device axis}}
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @step(%a: tensor<3xf32>) -> tensor<3xf32> {
    return %a : tensor<3xf32>
  }
}

// -----

// expected-error @+1 {{mhlo.num_replicas must be between 1 and 1048576, got 0}}
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 0 : i32} {
  func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    return %a : tensor<3xf32>
  }
}
