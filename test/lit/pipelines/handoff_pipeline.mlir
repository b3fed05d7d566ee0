// jax's per-device StableHLO (partition mode) through the handoff pipeline.

// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-handoff-pipeline)' | filecheck %s --check-prefixes=CHECK,REPLICA
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-handoff-pipeline{mode=partition})' | filecheck %s --check-prefixes=CHECK,PARTITION

// REPLICA-LABEL: module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32}
// PARTITION-LABEL: module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32}
// CHECK: func.func public @main(%[[X:.*]]: tensor<3xf32>) -> (tensor<3xf32>, tensor<i32>)
// REPLICA: "mhlo.all_reduce"(%[[X]]) <{replica_groups = dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>}>
// PARTITION: "mhlo.all_reduce"(%[[X]]) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}>
// CHECK: mhlo.erf
// REPLICA: mhlo.replica_id
// PARTITION: mhlo.partition_id
// CHECK-NOT: stablehlo.
// CHECK-NOT: chlo.
module @jit_f attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<i32>) {
    %0 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
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
