// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-verify-handoff)' | filecheck %s
// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-verify-handoff{num-replicas=4 num-partitions=1})' --verify-diagnostics | filecheck %s --check-prefix=EXPECT
// The Shardy form passes as read from the module (auto) and as sdy.
// RUN: pxla-opt %S/../Inputs/sdy_handoff.mlir --pass-pipeline='builtin.module(pxla-verify-handoff)' | filecheck %s --check-prefix=SDY
// RUN: pxla-opt %S/../Inputs/sdy_handoff.mlir --pass-pipeline='builtin.module(pxla-verify-handoff{sharding-dialect=sdy num-partitions=8})' | filecheck %s --check-prefix=SDY
// SDY: sdy.mesh @mesh = <["x"=2, "y"=4]>
// SDY: sdy.manual_computation
// SDY: "mhlo.all_reduce"

// Valid modules pass through unchanged.

// CHECK-LABEL: module @replicas
// CHECK: "mhlo.all_reduce"(%{{.*}}) <{replica_groups = dense<{{\[\[}}0, 2], [1, 3]]> : tensor<2x2xi64>}>
// CHECK: "mhlo.collective_permute"(%{{.*}}) <{source_target_pairs = dense<{{\[\[}}0, 1], [1, 2], [2, 3], [3, 0]]> : tensor<4x2xi64>}>
// EXPECT-LABEL: module @replicas
module @replicas attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    %1 = "mhlo.collective_permute"(%0) <{source_target_pairs = dense<[[0, 1], [1, 2], [2, 3], [3, 0]]> : tensor<4x2xi64>}> : (tensor<3xf32>) -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}

// -----

// all_reduce groups may differ in size (-1 pads the shorter ones), as jax
// lowers psum(..., axis_index_groups=[[0, 1, 2], [3]]).

// CHECK-LABEL: module @uneven_all_reduce_groups
// CHECK: replica_groups = dense<{{\[\[}}0, 1, 2], [3, -1, -1]]> : tensor<2x3xi64>
// EXPECT-LABEL: module @uneven_all_reduce_groups
module @uneven_all_reduce_groups attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1, 2], [3, -1, -1]]> : tensor<2x3xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// Flattened ids range over replicas x partitions; empty groups mean "all".

// CHECK-LABEL: module @partitions
// EXPECT-NOT: module @partitions
// expected-error @+1 {{'mhlo.num_replicas' is 2 but 4 was expected}}
module @partitions attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
    %0 = "mhlo.all_reduce"(%x) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    %1 = "mhlo.all_reduce"(%0) <{replica_groups = dense<> : tensor<0x0xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}
