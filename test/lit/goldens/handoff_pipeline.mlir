// Golden: the handoff pipeline's whole output for two per-device programs as
// jax lowers them (partition mode, StableHLO), in both modes. The generated
// blocks are rewritten by `make update-checks` after an intended change; what
// each form must do is checked by hand in pipelines/handoff_pipeline.mlir.

// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-handoff-pipeline)' | filecheck %s --check-prefix=REPLICA
// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-handoff-pipeline{mode=partition})' | filecheck %s --check-prefix=PARTITION

// psum over 2 groups of 2, erf, the device index.
// CHECK-GEN-BEGIN (pxla-mlir update-checks rewrites the lines up to CHECK-GEN-END)
// REPLICA-LABEL: module @psum_groups attributes {
// REPLICA-SAME:    mhlo.num_partitions = 1 : i32,
// REPLICA-SAME:    mhlo.num_replicas = 4 : i32} {
// REPLICA-LABEL: func.func public @main(
// REPLICA-SAME:    %[[ARG0:[0-9A-Za-z_$.-]+]]: tensor<3xf32>)
// REPLICA-SAME:    -> (tensor<3xf32>, tensor<i32>) {
// REPLICA-NEXT:      %[[ALL_REDUCE:[0-9A-Za-z_$.-]+]] = "mhlo.all_reduce"(%[[ARG0]]) <{replica_groups = dense<{{\[\[}}0, 1], [2, 3]]> : tensor<2x2xi64>}> ({
// REPLICA-NEXT:      ^bb0(%[[ARG1:[0-9A-Za-z_$.-]+]]: tensor<f32>, %[[ARG2:[0-9A-Za-z_$.-]+]]: tensor<f32>):
// REPLICA-NEXT:        %[[ADD:[0-9A-Za-z_$.-]+]] = mhlo.add %[[ARG1]], %[[ARG2]] : tensor<f32>
// REPLICA-NEXT:        mhlo.return %[[ADD]] : tensor<f32>
// REPLICA-NEXT:      }) : (tensor<3xf32>) -> tensor<3xf32>
// REPLICA-NEXT:      %[[ERF:[0-9A-Za-z_$.-]+]] = mhlo.erf %[[ALL_REDUCE]] : tensor<3xf32>
// REPLICA-NEXT:      %[[REPLICA_ID:[0-9A-Za-z_$.-]+]] = mhlo.replica_id : tensor<ui32>
// REPLICA-NEXT:      %[[CONVERT:[0-9A-Za-z_$.-]+]] = mhlo.convert %[[REPLICA_ID]] : (tensor<ui32>) -> tensor<i32>
// REPLICA-NEXT:      return %[[ERF]], %[[CONVERT]] : tensor<3xf32>, tensor<i32>
// REPLICA-NEXT:    }
// REPLICA-NEXT:  }
//
// PARTITION-LABEL: module @psum_groups attributes {
// PARTITION-SAME:    mhlo.num_partitions = 4 : i32,
// PARTITION-SAME:    mhlo.num_replicas = 1 : i32} {
// PARTITION-LABEL: func.func public @main(
// PARTITION-SAME:    %[[ARG0:[0-9A-Za-z_$.-]+]]: tensor<3xf32>)
// PARTITION-SAME:    -> (tensor<3xf32>, tensor<i32>) {
// PARTITION-NEXT:      %[[ALL_REDUCE:[0-9A-Za-z_$.-]+]] = "mhlo.all_reduce"(%[[ARG0]]) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
// PARTITION-NEXT:      ^bb0(%[[ARG1:[0-9A-Za-z_$.-]+]]: tensor<f32>, %[[ARG2:[0-9A-Za-z_$.-]+]]: tensor<f32>):
// PARTITION-NEXT:        %[[ADD:[0-9A-Za-z_$.-]+]] = mhlo.add %[[ARG1]], %[[ARG2]] : tensor<f32>
// PARTITION-NEXT:        mhlo.return %[[ADD]] : tensor<f32>
// PARTITION-NEXT:      }) : (tensor<3xf32>) -> tensor<3xf32>
// PARTITION-NEXT:      %[[ERF:[0-9A-Za-z_$.-]+]] = mhlo.erf %[[ALL_REDUCE]] : tensor<3xf32>
// PARTITION-NEXT:      %[[PARTITION_ID:[0-9A-Za-z_$.-]+]] = mhlo.partition_id : tensor<ui32>
// PARTITION-NEXT:      %[[CONVERT:[0-9A-Za-z_$.-]+]] = mhlo.convert %[[PARTITION_ID]] : (tensor<ui32>) -> tensor<i32>
// PARTITION-NEXT:      return %[[ERF]], %[[CONVERT]] : tensor<3xf32>, tensor<i32>
// PARTITION-NEXT:    }
// PARTITION-NEXT:  }
// CHECK-GEN-END

module @psum_groups attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<i32>) {
    %0 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    %1 = chlo.erf %0 : tensor<3xf32> -> tensor<3xf32>
    %2 = stablehlo.partition_id : tensor<ui32>
    %3 = stablehlo.convert %2 : (tensor<ui32>) -> tensor<i32>
    return %1, %3 : tensor<3xf32>, tensor<i32>
  }
}

// -----

// all_gather then a ring shift (ppermute) over 2 devices.
// CHECK-GEN-BEGIN (pxla-mlir update-checks rewrites the lines up to CHECK-GEN-END)
// REPLICA-LABEL: module @gather_shift attributes {
// REPLICA-SAME:    mhlo.num_partitions = 1 : i32,
// REPLICA-SAME:    mhlo.num_replicas = 2 : i32} {
// REPLICA-LABEL: func.func public @main(
// REPLICA-SAME:    %[[ARG0:[0-9A-Za-z_$.-]+]]: tensor<2x2xf32>)
// REPLICA-SAME:    -> tensor<4x2xf32> {
// REPLICA-NEXT:      %[[ALL_GATHER:[0-9A-Za-z_$.-]+]] = "mhlo.all_gather"(%[[ARG0]]) <{all_gather_dim = 0 : i64, replica_groups = dense<{{\[\[}}0, 1]]> : tensor<1x2xi64>}> : (tensor<2x2xf32>) -> tensor<4x2xf32>
// REPLICA-NEXT:      %[[COLLECTIVE_PERMUTE:[0-9A-Za-z_$.-]+]] = "mhlo.collective_permute"(%[[ALL_GATHER]]) <{source_target_pairs = dense<{{\[\[}}0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
// REPLICA-NEXT:      return %[[COLLECTIVE_PERMUTE]] : tensor<4x2xf32>
// REPLICA-NEXT:    }
// REPLICA-NEXT:  }
//
// PARTITION-LABEL: module @gather_shift attributes {
// PARTITION-SAME:    mhlo.num_partitions = 2 : i32,
// PARTITION-SAME:    mhlo.num_replicas = 1 : i32} {
// PARTITION-LABEL: func.func public @main(
// PARTITION-SAME:    %[[ARG0:[0-9A-Za-z_$.-]+]]: tensor<2x2xf32>)
// PARTITION-SAME:    -> tensor<4x2xf32> {
// PARTITION-NEXT:      %[[ALL_GATHER:[0-9A-Za-z_$.-]+]] = "mhlo.all_gather"(%[[ARG0]]) <{all_gather_dim = 0 : i64, channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> : (tensor<2x2xf32>) -> tensor<4x2xf32>
// PARTITION-NEXT:      %[[COLLECTIVE_PERMUTE:[0-9A-Za-z_$.-]+]] = "mhlo.collective_permute"(%[[ALL_GATHER]]) <{channel_handle = #mhlo.channel_handle<handle = 2, type = 1>, source_target_pairs = dense<{{\[\[}}0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
// PARTITION-NEXT:      return %[[COLLECTIVE_PERMUTE]] : tensor<4x2xf32>
// PARTITION-NEXT:    }
// PARTITION-NEXT:  }
// CHECK-GEN-END

module @gather_shift attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x2xf32>) -> tensor<4x2xf32> {
    %0 = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> : (tensor<2x2xf32>) -> tensor<4x2xf32>
    %1 = "stablehlo.collective_permute"(%0) <{channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
    return %1 : tensor<4x2xf32>
  }
}
