// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-add-device-axis)' | filecheck %s

// A per-device replica-mode program: every argument and result gains a
// leading device axis of size 1, reshaped at the boundary, and the record says
// the global value is the devices' values stacked on it.

// CHECK-LABEL: func.func public @main
// CHECK-SAME: (%[[X:.*]]: tensor<1x3xf32> {pxla.tile_dims = {{\[\[}}"device"], []]}, %[[S:.*]]: tensor<1xf32> {jax.buffer_donor = true, pxla.tile_dims = {{\[\[}}"device"]]})
// CHECK-SAME: -> (tensor<1x3xf32> {pxla.tile_dims = {{\[\[}}"device"], []]}, tensor<1xi32> {pxla.tile_dims = {{\[\[}}"device"]]})
// CHECK-SAME: attributes {pxla.mesh = "device=4"}
// CHECK-NEXT: %[[X1:.*]] = mhlo.reshape %[[X]] : (tensor<1x3xf32>) -> tensor<3xf32>
// CHECK-NEXT: %[[S1:.*]] = mhlo.reshape %[[S]] : (tensor<1xf32>) -> tensor<f32>
// CHECK: %[[SUM:.*]] = "mhlo.all_reduce"(%[[X1]])
// CHECK: %[[ID:.*]] = mhlo.convert
// CHECK: %[[R0:.*]] = mhlo.reshape %[[SUM]] : (tensor<3xf32>) -> tensor<1x3xf32>
// CHECK-NEXT: %[[R1:.*]] = mhlo.reshape %[[ID]] : (tensor<i32>) -> tensor<1xi32>
// CHECK-NEXT: return %[[R0]], %[[R1]] : tensor<1x3xf32>, tensor<1xi32>
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<3xf32>, %s: tensor<f32> {jax.buffer_donor = true}) -> (tensor<3xf32>, tensor<i32>) {
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %1 = mhlo.add %a, %b : tensor<f32>
      mhlo.return %1 : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    %2 = mhlo.replica_id : tensor<ui32>
    %3 = mhlo.convert %2 : (tensor<ui32>) -> tensor<i32>
    return %0, %3 : tensor<3xf32>, tensor<i32>
  }
}

// -----

// The module's own pxla.mesh stays; @main's mesh is the stacked devices.

// CHECK-LABEL: module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32, pxla.mesh = "x=2"}
// CHECK: func.func public @main(%[[A:.*]]: tensor<1x2x2xi32> {pxla.tile_dims = {{\[\[}}"device"], [], []]}) -> (tensor<1x2x2xi32> {pxla.tile_dims = {{\[\[}}"device"], [], []]}) attributes {pxla.mesh = "device=2"}
// CHECK-NEXT: %[[B:.*]] = mhlo.reshape %[[A]] : (tensor<1x2x2xi32>) -> tensor<2x2xi32>
// CHECK-NEXT: %[[C:.*]] = mhlo.reshape %[[B]] : (tensor<2x2xi32>) -> tensor<1x2x2xi32>
// CHECK-NEXT: return %[[C]]
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32, pxla.mesh = "x=2"} {
  func.func public @main(%a: tensor<2x2xi32>) -> tensor<2x2xi32> {
    return %a : tensor<2x2xi32>
  }
}
