// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-xmap-pipeline{lowering=vectorize})' | filecheck %s --check-prefix=SDY
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-xmap-pipeline{lowering=vectorize sharding-dialect=gspmd})' | filecheck %s --check-prefix=GSPMD

// The vectorize lowering expands the constraints a nested xmap leaves in the
// global view, on the same mesh as the boundary shardings.

// SDY: sdy.mesh @mesh = <["x"=2, "y"=4]>
// SDY: func.func public @main(%arg0: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
// SDY: sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {"y"}]> : tensor<4x8xf32>
// SDY-NOT: pxla.sharding_constraint

// GSPMD: func.func public @main(%arg0: tensor<4x8xf32> {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"})
// GSPMD: mhlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{devices=[2,4]<=[8]}"}
// GSPMD-NOT: pxla.sharding_constraint
module @xmap_outer attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @main(%arg0: tensor<4x8xf32> {pxla.dims = [["x"], []]}) -> (tensor<4x8xf32> {pxla.dims = [["x"], []]}) {
    %0 = stablehlo.custom_call @pxla.sharding_constraint(%arg0) {pxla.dims = [["x"], ["y"]]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.negate %0 : tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
}
