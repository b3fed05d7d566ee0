// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-convert-to-replica-mode)' | filecheck %s

// Flattened ids (channel + use_global_device_ids) with one replica are the new
// replica ids; partition_id becomes replica_id.

// CHECK-LABEL: module @flattened
// CHECK-SAME: mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32
module @flattened attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  // CHECK: func.func public @main(%[[X:.*]]: tensor<3xf32>)
  func.func public @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<ui32>) {
    // CHECK-NEXT: %[[AR:.*]] = "mhlo.all_reduce"(%[[X]]) <{replica_groups = dense<{{\[\[}}0, 1], [2, 3]]> : tensor<2x2xi64>}>
    %0 = "mhlo.all_reduce"(%x) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    // CHECK: %[[ID:.*]] = mhlo.replica_id : tensor<ui32>
    // CHECK-NOT: partition_id
    %1 = mhlo.partition_id : tensor<ui32>
    // CHECK: return %[[AR]], %[[ID]]
    return %0, %1 : tensor<3xf32>, tensor<ui32>
  }
}

// -----

// all_gather, all_to_all and collective_permute lose their channels; their
// partition ids become replica ids unchanged.

// CHECK-LABEL: module @other_collectives
// CHECK-SAME: mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32
module @other_collectives attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
    // CHECK: "mhlo.all_gather"(%{{.*}}) <{all_gather_dim = 0 : i64, replica_groups = dense<{{\[\[}}0, 1]]> : tensor<1x2xi64>}>
    %0 = "mhlo.all_gather"(%x) <{all_gather_dim = 0 : i64, channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> : (tensor<2x2xf32>) -> tensor<4x2xf32>
    // CHECK: "mhlo.all_to_all"(%{{.*}}) <{concat_dimension = 0 : i64, replica_groups = dense<{{\[\[}}0, 1]]> : tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 1 : i64}>
    %1 = "mhlo.all_to_all"(%0) <{channel_handle = #mhlo.channel_handle<handle = 2, type = 1>, concat_dimension = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 1 : i64}> : (tensor<4x2xf32>) -> tensor<8x1xf32>
    %2 = mhlo.negate %x : tensor<2x2xf32>
    // CHECK: "mhlo.collective_permute"(%{{.*}}) <{source_target_pairs = dense<{{\[\[}}0, 1], [1, 0]]> : tensor<2x2xi64>}>
    %3 = "mhlo.collective_permute"(%2) <{channel_handle = #mhlo.channel_handle<handle = 3, type = 1>, source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<2x2xf32>) -> tensor<2x2xf32>
    return %3 : tensor<2x2xf32>
  }
}

// -----

// Groups that counted replicas keep their meaning over the new replicas: a
// cross-replica-and-partition group {0} spans all partitions (one group of
// all 4); a plain cross-replica group {0} was per partition (4 singletons).

// CHECK-LABEL: module @replica_counted_groups
module @replica_counted_groups attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    // CHECK: "mhlo.all_reduce"(%{{.*}}) <{replica_groups = dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>}>
    %0 = "mhlo.all_reduce"(%x) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0]]> : tensor<1x1xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<f32>) -> tensor<f32>
    // CHECK: "mhlo.all_reduce"(%{{.*}}) <{replica_groups = dense<{{\[\[}}0], [1], [2], [3]]> : tensor<4x1xi64>}>
    %1 = "mhlo.all_reduce"(%0) <{replica_groups = dense<[[0]]> : tensor<1x1xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<f32>) -> tensor<f32>
    return %1 : tensor<f32>
  }
}

// -----

// Trivial shardings are dropped; a module already in replica mode is unchanged.

// CHECK-LABEL: module @manual_shardings
// CHECK: func.func public @main(%{{.*}}: tensor<2xf32>) -> tensor<2xf32>
// CHECK-NOT: mhlo.sharding
module @manual_shardings attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<2xf32> {mhlo.sharding = "{manual}"}) -> (tensor<2xf32> {mhlo.sharding = "{replicated}"}) {
    %0 = mhlo.negate %x {mhlo.sharding = "{manual}"} : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

// CHECK-LABEL: module @already_replicas
// CHECK-SAME: mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32
// CHECK: mhlo.replica_id
module @already_replicas attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32} {
  func.func public @main() -> tensor<ui32> {
    %0 = mhlo.replica_id : tensor<ui32>
    return %0 : tensor<ui32>
  }
}
