// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-verify-handoff)'

// expected-error @+1 {{module has no 'mhlo.num_replicas' attribute}}
module @no_counts {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}

// -----

// expected-error @+1 {{mhlo.num_partitions must be between 1 and 1048576, got 0}}
module @zero_partitions attributes {mhlo.num_partitions = 0 : i32, mhlo.num_replicas = 1 : i32} {
}

// -----

module @leftovers attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{placeholder @pxla.shard was not expanded}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64} : (tensor<8xf32>) -> tensor<2xf32>
    // expected-error @+1 {{'stablehlo.negate' is not builtin/func/mhlo; legalize it with stablehlo-legalize-to-hlo}}
    %1 = stablehlo.negate %0 : tensor<2xf32>
    // Reported once per op name.
    %2 = stablehlo.negate %1 : tensor<2xf32>
    // expected-error @+1 {{'chlo.erf' is not builtin/func/mhlo; legalize it with func.func(chlo-legalize-to-hlo)}}
    %3 = chlo.erf %2 : tensor<2xf32> -> tensor<2xf32>
    return %3 : tensor<2xf32>
  }
}

// -----

module @groups_not_covering attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    // expected-error @+1 {{mhlo.all_reduce (cross-replica, ids 0..3): groups do not cover ids [3]}}
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @ids_out_of_range attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    // expected-error @+1 {{ids [4, 5] are out of range for num_replicas = 4, num_partitions = 1}}
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1, 4], [2, 3, 5]]> : tensor<2x3xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @uneven_groups attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    // expected-error @+1 {{replica groups have different sizes (padded with -1)}}
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1, 2], [3, -1, -1]]> : tensor<2x3xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// Overlapping groups and repeated permute targets are caught by the MHLO
// verifier when the module is parsed.

module @overlapping_groups attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    // expected-error @+2 {{replica id #1 seen more than once}}
    // expected-error @+1 {{failed to infer returned types}}
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1], [1, 3]]> : tensor<2x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @partition_ids attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    // Cross-partition ids range over the 2 partitions only.
    // expected-error @+1 {{mhlo.collective_permute (cross-partition, ids 0..1): ids [2] are out of range}}
    %0 = "mhlo.collective_permute"(%x) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 2]]> : tensor<1x2xi64>}> : (tensor<2xf32>) -> tensor<2xf32>
    %1 = "mhlo.collective_permute"(%0) <{source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<2xf32>) -> tensor<2xf32>
    // Flattened ids range over replicas x partitions (0..3).
    // expected-error @+1 {{mhlo.all_gather (flattened-id, ids 0..3): groups do not cover ids [2, 3]}}
    %2 = "mhlo.all_gather"(%1) <{all_gather_dim = 0 : i64, channel_handle = #mhlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> : (tensor<2xf32>) -> tensor<4xf32>
    return %1 : tensor<2xf32>
  }
}

// -----

module @device_id_warnings attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main() -> tensor<ui32> {
    // expected-warning @+1 {{replica_id is always 0 in a module with num_replicas = 1; did you mean partition_id?}}
    %0 = mhlo.replica_id : tensor<ui32>
    return %0 : tensor<ui32>
  }
}

// -----

module @manual_placeholder attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<1xf32> {
    // expected-error @+1 {{placeholder @pxla.full_to_shard was not expanded; run pxla-expand-manual-sharding before handing the module to XLA}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<1xf32>
    return %0 : tensor<1xf32>
  }
}

// -----

// expected-error @+1 {{mhlo.num_replicas must be an integer attribute (e.g. 4 : i64), got "4"}}
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = "4"} {
}
