// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-verify-form)' | filecheck %s

// The pxla form checks without changing anything: the module below is
// printed back as it was read.

// A nested pmap's body as import leaves it (StableHLO, per-device tiles over
// an inner replica axis): placeholders, pxla.tile_dims and the mesh.

// CHECK-LABEL: module @nested_pmap
// CHECK-SAME: pxla.mesh = "i=2,_pxla_rep=4"
// CHECK: func.func public @main(%arg0: tensor<1x4x3xf32> {pxla.tile_dims = {{\[\[}}"i"], [], []]}) -> (tensor<1x4xf32> {pxla.tile_dims = {{\[\[}}"i"], []]})
// CHECK: stablehlo.custom_call @pxla.shard(%{{.*}}) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 4 : i64, pxla.stride = 1 : i64}
// CHECK: stablehlo.custom_call @pxla.unshard(%{{.*}}) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 4 : i64, pxla.stride = 1 : i64}
module @nested_pmap attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "i=2,_pxla_rep=4"} {
  func.func public @main(%arg0: tensor<1x4x3xf32> {pxla.tile_dims = [["i"], [], []]}) -> (tensor<1x4xf32> {pxla.tile_dims = [["i"], []]}) {
    %0 = stablehlo.reshape %arg0 : (tensor<1x4x3xf32>) -> tensor<4x3xf32>
    %1 = stablehlo.custom_call @pxla.shard(%0) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 4 : i64, pxla.stride = 1 : i64} : (tensor<4x3xf32>) -> tensor<3xf32>
    %cst = stablehlo.constant dense<0.0> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %cst) applies stablehlo.add across dimensions = [0] : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
    %3 = stablehlo.custom_call @pxla.unshard(%2) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 4 : i64, pxla.stride = 1 : i64} : (tensor<f32>) -> tensor<4xf32>
    %4 = stablehlo.reshape %3 : (tensor<4xf32>) -> tensor<1x4xf32>
    return %4 : tensor<1x4xf32>
  }
}

// -----

// A partitioned pmap after legalization (MHLO): the manual region's
// boundary, pxla.dims on @main and the automatic axis 'y'.

// CHECK-LABEL: module @manual_region
// CHECK-SAME: pxla.manual_axes = ["x"]
// CHECK: mhlo.custom_call @pxla.full_to_shard(%arg0) {pxla.dims = {{\[\[}}"x"], ["y"]], pxla.manual_axes = ["x"]}
// CHECK: mhlo.custom_call @pxla.shard_to_full(%{{.*}}) {pxla.dims = {{\[\[}}"x"], ["y"]], pxla.manual_axes = ["x"]}
module @manual_region attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.manual_axes = ["x"], pxla.mesh = "x=2,y=4"} {
  func.func public @main(%arg0: tensor<4x8xf32> {pxla.dims = [["x"], ["y"]]}) -> (tensor<4x8xf32> {pxla.dims = [["x"], ["y"]]}) {
    %0 = mhlo.custom_call @pxla.full_to_shard(%arg0) {pxla.dims = [["x"], ["y"]], pxla.manual_axes = ["x"]} : (tensor<4x8xf32>) -> tensor<2x8xf32>
    %1 = mhlo.negate %0 : tensor<2x8xf32>
    %2 = mhlo.custom_call @pxla.shard_to_full(%1) {pxla.dims = [["x"], ["y"]], pxla.manual_axes = ["x"]} : (tensor<2x8xf32>) -> tensor<4x8xf32>
    return %2 : tensor<4x8xf32>
  }
}

// -----

// xmap's global view: a layout constrained inside, "?" left to XLA, and an
// argument laid out by a serialized ShardingSpec.

// CHECK-LABEL: module @global_view
// CHECK: {pxla.sharding_spec = "ShardingSpec((Chunked([8]),), (ShardedAxis(0),))"}
// CHECK: stablehlo.custom_call @pxla.sharding_constraint(%{{.*}}) {pxla.dims = ["?", ["y", "x"]]}
module @global_view attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @main(%arg0: tensor<2x8xf32> {pxla.dims = [["x"], []]}, %arg1: tensor<8xf32> {pxla.sharding_spec = "ShardingSpec((Chunked([8]),), (ShardedAxis(0),))"}) -> (tensor<2x8xf32> {pxla.dims = ["?", "?"]}) {
    %0 = stablehlo.custom_call @pxla.sharding_constraint(%arg0) {pxla.dims = ["?", ["y", "x"]]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return %0 : tensor<2x8xf32>
  }
}

// -----

// A module with no pxla attributes at all (jit's, or one the pipeline
// already handed over) is in the form too.

// CHECK-LABEL: module @plain
// CHECK: mhlo.add
module @plain {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = mhlo.add %arg0, %arg0 : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
