// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-convert-to-replica-mode)'

// expected-error @+1 {{module has both replicas and partitions (num_replicas = 2, num_partitions = 4)}}
module @mixed attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}

// -----

module @spmd_call attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{@Sharding needs XLA's SPMD partitioner}}
    %0 = mhlo.custom_call @Sharding(%x) {mhlo.sharding = "{devices=[4]<=[4]}"} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module @tiled_argument attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  // expected-error @+1 {{argument sharding "{devices=[4]<=[4]}" needs XLA's SPMD partitioner}}
  func.func public @main(%x: tensor<8xf32> {mhlo.sharding = "{devices=[4]<=[4]}"}) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

module @tiled_op attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{sharding '{devices=[2]<=[2]}' needs XLA's SPMD partitioner}}
    %0 = mhlo.negate %x {mhlo.sharding = "{devices=[2]<=[2]}"} : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module @replica_group_beyond_zero attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    // expected-error @+1 {{groups [[0, 1]] name replicas other than 0 in a module with one replica}}
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @sharding_not_a_string attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  // expected-error @+1 {{mhlo.sharding must be a string, got [["x"]]}}
  func.func public @main(%x: tensor<8xf32> {mhlo.sharding = [["x"]]}) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

module @op_sharding_unit attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{mhlo.sharding must be a string, got unit}}
    %0 = mhlo.negate %x {mhlo.sharding} : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
