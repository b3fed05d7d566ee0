// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-inline-manual-computations)' | filecheck %s

// One partition: the region's body replaces it (block arguments by the
// operands, results by what sdy.return returns); meshes and the boundary's
// shardings stay.

// CHECK-LABEL: module @one_partition
// CHECK: sdy.mesh @mesh = <["i"=1]>
// CHECK: func.func public @main(%[[G:.*]]: tensor<1x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}, {}]>}, %[[B:.*]]: tensor<3xf32>)
// CHECK-NEXT: %[[C:.*]] = mhlo.constant
// CHECK-NEXT: %[[R:.*]] = call @main_per_device(%[[G]]) : (tensor<1x12xf32>) -> tensor<1x12xf32>
// CHECK-NEXT: %[[N:.*]] = mhlo.add %[[B]], %[[C]] : tensor<3xf32>
// CHECK-NEXT: return %[[R]], %[[N]], %[[B]] : tensor<1x12xf32>, tensor<3xf32>, tensor<3xf32>
// CHECK-NOT: sdy.manual_computation
// CHECK-NOT: sdy.return
module @one_partition attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["i"=1]>
  func.func public @main(%g: tensor<1x12xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}, {}]>}, %b: tensor<3xf32>)
      -> (tensor<1x12xf32>, tensor<3xf32>, tensor<3xf32>) {
    %0:3 = sdy.manual_computation(%g, %b) in_shardings=[<@mesh, [{"i"}, {}]>, <@mesh, [{}]>] out_shardings=[<@mesh, [{"i"}, {}]>, <@mesh, [{}]>, <@mesh, [{}]>] manual_axes={"i"} (%t: tensor<1x12xf32>, %u: tensor<3xf32>) {
      %c = mhlo.constant dense<1.000000e+00> : tensor<3xf32>
      %1 = func.call @main_per_device(%t) : (tensor<1x12xf32>) -> tensor<1x12xf32>
      %2 = mhlo.add %u, %c : tensor<3xf32>
      sdy.return %1, %2, %u : tensor<1x12xf32>, tensor<3xf32>, tensor<3xf32>
    } : (tensor<1x12xf32>, tensor<3xf32>) -> (tensor<1x12xf32>, tensor<3xf32>, tensor<3xf32>)
    return %0#0, %0#1, %0#2 : tensor<1x12xf32>, tensor<3xf32>, tensor<3xf32>
  }
  func.func private @main_per_device(%x: tensor<1x12xf32>) -> tensor<1x12xf32> {
    return %x : tensor<1x12xf32>
  }
}

// -----

// Nested regions (a nest of size-1 pmaps, jax's axis_index region of a
// partitioned body) all go, the outer first.

// CHECK-LABEL: module @nested
// CHECK: func.func public @main(%[[X:.*]]: tensor<2xf32>)
// CHECK-NEXT: %[[A:.*]] = mhlo.negate %[[X]]
// CHECK-NEXT: %[[B:.*]] = mhlo.abs %[[A]]
// CHECK-NEXT: return %[[B]]
module @nested attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["i"=1, "j"=1]>
  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %0 = sdy.manual_computation(%x) in_shardings=[<@mesh, [{"i"}]>] out_shardings=[<@mesh, [{"i"}]>] manual_axes={"i"} (%t: tensor<2xf32>) {
      %1 = mhlo.negate %t : tensor<2xf32>
      %2 = sdy.manual_computation(%1) in_shardings=[<@mesh, [{"j"}]>] out_shardings=[<@mesh, [{"j"}]>] manual_axes={"j"} (%u: tensor<2xf32>) {
        %3 = mhlo.abs %u : tensor<2xf32>
        sdy.return %3 : tensor<2xf32>
      } : (tensor<2xf32>) -> tensor<2xf32>
      sdy.return %2 : tensor<2xf32>
    } : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

// Several partitions: XLA's SPMD partitioner takes the region apart; unchanged.

// CHECK-LABEL: module @eight_partitions
// CHECK: sdy.manual_computation
module @eight_partitions attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["i"=8]>
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = sdy.manual_computation(%x) in_shardings=[<@mesh, [{"i"}]>] out_shardings=[<@mesh, [{"i"}]>] manual_axes={"i"} (%t: tensor<1xf32>) {
      sdy.return %t : tensor<1xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
