// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-add-sdy-mesh,pxla-expand-sharding-constraints)' | filecheck %s --check-prefix=SDY
// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-expand-sharding-constraints{sharding-dialect=gspmd})' | filecheck %s --check-prefix=GSPMD

// A nested xmap's operand split over both mesh axes, its result with an open
// dimension, and a replicated scalar (every placeholder is replaced in place).

// SDY-LABEL: func.func public @main
// SDY-NEXT: %[[A:.*]] = sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {"y"}]> : tensor<2x8xf32>
// SDY-NEXT: %[[N:.*]] = mhlo.negate %[[A]] : tensor<2x8xf32>
// SDY-NEXT: %[[B:.*]] = sdy.sharding_constraint %[[N]] <@mesh, [{?}, {"y", "x"}]> : tensor<2x8xf32>
// SDY-NEXT: %[[S:.*]] = sdy.sharding_constraint %arg1 <@mesh, []> : tensor<f32>
// SDY-NEXT: return %[[B]], %[[S]]
// SDY-NOT: pxla.sharding_constraint

// GSPMD-LABEL: func.func public @main
// GSPMD-NEXT: %[[A:.*]] = mhlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{devices=[2,4]<=[8]}"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// GSPMD-NEXT: %[[N:.*]] = mhlo.negate %[[A]] : tensor<2x8xf32>
// GSPMD-NEXT: %[[B:.*]] = mhlo.custom_call @Sharding(%[[N]]) {backend_config = "unspecified_dims=[0]", mhlo.sharding = "{devices=[1,8]<=[2,4]T(1,0)}"} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// GSPMD-NEXT: %[[S:.*]] = mhlo.custom_call @Sharding(%arg1) {mhlo.sharding = "{replicated}"} : (tensor<f32>) -> tensor<f32>
// GSPMD-NEXT: return %[[B]], %[[S]]
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @main(%a: tensor<2x8xf32>, %s: tensor<f32>) -> (tensor<2x8xf32>, tensor<f32>) {
    %0 = mhlo.custom_call @pxla.sharding_constraint(%a) {pxla.dims = [["x"], ["y"]]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %1 = mhlo.negate %0 : tensor<2x8xf32>
    %2 = mhlo.custom_call @pxla.sharding_constraint(%1) {pxla.dims = ["?", ["y", "x"]]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %3 = mhlo.custom_call @pxla.sharding_constraint(%s) {pxla.dims = []} : (tensor<f32>) -> tensor<f32>
    return %2, %3 : tensor<2x8xf32>, tensor<f32>
  }
}

// -----

// Without placeholders the module is left as it is.

// SDY-LABEL: func.func public @untouched
// SDY-NEXT: return %arg0
// GSPMD-LABEL: func.func public @untouched
// GSPMD-NEXT: return %arg0
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  func.func public @untouched(%a: tensor<8xf32>) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}
