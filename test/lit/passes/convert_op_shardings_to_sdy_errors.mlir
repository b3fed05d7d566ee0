// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-convert-op-shardings-to-sdy)'

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @manual_outside_a_region(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{mhlo.sharding = "{manual}" on an op of a module without an sdy.manual_computation}}
    mhlo.custom_call @callback(%arg0) {has_side_effect = true, mhlo.sharding = "{manual}"} : (tensor<2xf32>) -> ()
    return %arg0 : tensor<2xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @tiled(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{op-level mhlo.sharding '{devices=[4]<=[4]}' has no Shardy form here}}
    %0 = mhlo.add %arg0, %arg0 {mhlo.sharding = "{devices=[4]<=[4]}"} : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @not_a_string(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{mhlo.sharding must be a string, got 3 : i64}}
    %0 = mhlo.add %arg0, %arg0 {mhlo.sharding = 3} : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
