// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-wrap-manual-main)' | filecheck %s

// A mapped argument (tile [1,3] of [8,3]) and a broadcast one (no tile_dims);
// donation and result attributes move to the new @main.

// CHECK-LABEL: module @wrap
// CHECK: func.func public @main(%[[G:.*]]: tensor<8x3xf32> {jax.buffer_donor = true, pxla.dims = {{\[\[}}"i"], []]}, %[[B:.*]]: tensor<5xf32> {pxla.dims = {{\[\[}}]]})
// CHECK-SAME: -> (tensor<3x8xf32> {jax.result_info = "out", pxla.dims = {{\[\[}}], ["i"]]})
// CHECK-NEXT: %[[T:.*]] = mhlo.custom_call @pxla.full_to_shard(%[[G]]) {pxla.dims = {{\[\[}}"i"], []]} : (tensor<8x3xf32>) -> tensor<1x3xf32>
// CHECK-NEXT: %[[TB:.*]] = mhlo.custom_call @pxla.full_to_shard(%[[B]]) {pxla.dims = {{\[\[}}]]} : (tensor<5xf32>) -> tensor<5xf32>
// CHECK-NEXT: %[[R:.*]] = call @main_per_device(%[[T]], %[[TB]]) : (tensor<1x3xf32>, tensor<5xf32>) -> tensor<3x1xf32>
// CHECK-NEXT: %[[O:.*]] = mhlo.custom_call @pxla.shard_to_full(%[[R]]) {pxla.dims = {{\[\[}}], ["i"]]} : (tensor<3x1xf32>) -> tensor<3x8xf32>
// CHECK-NEXT: return %[[O]]
// CHECK: func.func private @main_per_device(%{{.*}}: tensor<1x3xf32>, %{{.*}}: tensor<5xf32>) -> tensor<3x1xf32>
module @wrap attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=8"} {
  func.func public @main(%x: tensor<1x3xf32> {jax.buffer_donor = true, pxla.tile_dims = [["i"], []]}, %b: tensor<5xf32>)
      -> (tensor<3x1xf32> {jax.result_info = "out", pxla.tile_dims = [[], ["i"]]}) {
    %0 = "mhlo.transpose"(%x) <{permutation = dense<[1, 0]> : tensor<2xi64>}> : (tensor<1x3xf32>) -> tensor<3x1xf32>
    return %0 : tensor<3x1xf32>
  }
}

// -----

// Manual over i only (pxla.manual_axes on the module): model lays the global
// weights out without dividing the tile; the placeholders say which axes are manual.

// CHECK-LABEL: module @partitioned
// CHECK: func.func public @main(%[[G:.*]]: tensor<2x16x32xf32> {pxla.dims = {{\[\[}}"i"], [], ["model"]]})
// CHECK-NEXT: mhlo.custom_call @pxla.full_to_shard(%[[G]]) {pxla.dims = {{\[\[}}"i"], [], ["model"]], pxla.manual_axes = ["i"]} : (tensor<2x16x32xf32>) -> tensor<1x16x32xf32>
module @partitioned attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=2,model=4", pxla.manual_axes = ["i"]} {
  func.func public @main(%w: tensor<1x16x32xf32> {pxla.tile_dims = [["i"], [], ["model"]]}) -> tensor<1x16x32xf32> {
    return %w : tensor<1x16x32xf32>
  }
}
