// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-expand-manual-sharding)' | filecheck %s

// Fully manual 2x4 mesh: dim 0 split over x, y replicated in the full value.

// CHECK-LABEL: func.func public @all_manual
// CHECK-SAME: (%[[X:.*]]: tensor<8x4x3xf32>)
// CHECK-NEXT: %[[S:.*]] = mhlo.custom_call @Sharding(%[[X]]) {mhlo.sharding = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"} : (tensor<8x4x3xf32>) -> tensor<8x4x3xf32>
// CHECK-NEXT: %[[T:.*]] = mhlo.custom_call @SPMDFullToShardShape(%[[S]]) {mhlo.sharding = "{manual}"} : (tensor<8x4x3xf32>) -> tensor<4x4x3xf32>
// CHECK-NEXT: %[[N:.*]] = mhlo.negate %[[T]] : tensor<4x4x3xf32>
// CHECK-NEXT: %[[M:.*]] = mhlo.custom_call @Sharding(%[[N]]) {mhlo.sharding = "{manual}"} : (tensor<4x4x3xf32>) -> tensor<4x4x3xf32>
// CHECK-NEXT: %[[F:.*]] = mhlo.custom_call @SPMDShardToFullShape(%[[M]]) {mhlo.sharding = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"} : (tensor<4x4x3xf32>) -> tensor<8x4x3xf32>
// CHECK-NEXT: return %[[F]]
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @all_manual(%x: tensor<8x4x3xf32>) -> tensor<8x4x3xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"], [], []]} : (tensor<8x4x3xf32>) -> tensor<4x4x3xf32>
    %1 = mhlo.negate %0 : tensor<4x4x3xf32>
    %2 = mhlo.custom_call @pxla.shard_to_full(%1) {pxla.dims = [["x"], [], []]} : (tensor<4x4x3xf32>) -> tensor<8x4x3xf32>
    return %2 : tensor<8x4x3xf32>
  }
}

// -----

// Two mesh axes on one dimension (y major), another on dim 1; unspecified
// dim 2 is recorded in backend_config on both calls.

// CHECK-LABEL: func.func public @two_axes_one_dim
// CHECK: @Sharding(%{{.*}}) {backend_config = "unspecified_dims=[2]", mhlo.sharding = "{devices=[4,2,1]<=[2,4]T(1,0)}"} : (tensor<8x4x3xf32>) -> tensor<8x4x3xf32>
// CHECK-NEXT: @SPMDFullToShardShape(%{{.*}}) {backend_config = "unspecified_dims=[2]", mhlo.sharding = "{manual}"} : (tensor<8x4x3xf32>) -> tensor<2x2x3xf32>
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=2,z=2"} {
  func.func public @two_axes_one_dim(%x: tensor<8x4x3xf32>) -> tensor<2x2x3xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["y", "z"], ["x"], "?"]} : (tensor<8x4x3xf32>) -> tensor<2x2x3xf32>
    return %0 : tensor<2x2x3xf32>
  }
}

// -----

// Partially manual (only x), a mesh on the op overriding the module's; the
// tile's sharding keeps y as a replicated subgroup.

// CHECK-LABEL: func.func public @partial
// CHECK: @Sharding(%{{.*}}) {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"}
// CHECK-NEXT: @SPMDFullToShardShape(%{{.*}}) {mhlo.sharding = "{devices=[1,1,2,4]<=[8] last_tile_dims={manual, replicated}}"} : (tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK: @Sharding(%{{.*}}) {mhlo.sharding = "{devices=[1,1,2,4]<=[8] last_tile_dims={manual, replicated}}"}
// CHECK-NEXT: @SPMDShardToFullShape(%{{.*}}) {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"} : (tensor<4x4xf32>) -> tensor<8x4xf32>
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "p=8"} {
  func.func public @partial(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.mesh = "x=2,y=4", pxla.dims = [["x"], []], pxla.manual_axes = ["x"]} : (tensor<8x4xf32>) -> tensor<4x4xf32>
    %1 = mhlo.custom_call @pxla.shard_to_full(%0) {pxla.mesh = "x=2,y=4", pxla.dims = [["x"], []], pxla.manual_axes = ["x"]} : (tensor<4x4xf32>) -> tensor<8x4xf32>
    return %1 : tensor<8x4xf32>
  }
}

// -----

// Partially manual with an automatic axis splitting the full value (a
// partitioned pmap body): model splits dim 1 of the full value and of the
// tile's sharding, not the tile's shape.

// CHECK-LABEL: func.func public @automatic_axis
// CHECK: @Sharding(%{{.*}}) {mhlo.sharding = "{devices=[2,4]<=[8]}"} : (tensor<8x32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT: @SPMDFullToShardShape(%{{.*}}) {mhlo.sharding = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={manual}}"} : (tensor<8x32xf32>) -> tensor<4x32xf32>
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "data=2,model=4"} {
  func.func public @automatic_axis(%x: tensor<8x32xf32>) -> tensor<4x32xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["data"], ["model"]], pxla.manual_axes = ["data"]} : (tensor<8x32xf32>) -> tensor<4x32xf32>
    return %0 : tensor<4x32xf32>
  }
}
