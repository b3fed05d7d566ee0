// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-add-sdy-mesh)'

// expected-error @+1 {{pxla.mesh "x=2,y=4" has 8 devices, but the module runs as 8 replicas x 1 partitions; a Shardy mesh needs partition mode with mhlo.num_partitions = 8 and mhlo.num_replicas = 1}}
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @replica_mode(%a: tensor<8xf32>) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=8"} {
  func.func public @other_mesh_too_small(%a: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{pxla.mesh "x=2,y=2" has 4 devices, but the module runs as 1 replicas x 8 partitions}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%a) {pxla.mesh = "x=2,y=2", pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<4xf32>
    return %a : tensor<8xf32>
  }
}

// -----

// expected-error @+1 {{bad pxla.mesh 'x:2': expected comma-separated name=size}}
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x:2"} {
}

// -----

// expected-error @+1 {{mhlo.num_partitions must be an integer attribute}}
module attributes {mhlo.num_partitions = "8", mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
}
