// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-contract-batch-sums)' | filecheck %s

// A weight gradient summed over the examples (jax's transpose of a vmapped
// dot): the batched outer products, their transpose and the sum become one
// dot contracting the examples, then a transpose of what is left.

// CHECK-LABEL: func.func public @outer_products
// CHECK-SAME: (%[[G:.*]]: tensor<16x4xf32>, %[[H:.*]]: tensor<16x64xf32>)
// CHECK-NOT: mhlo.reduce
// CHECK: %[[D:.*]] = "mhlo.dot_general"(%[[G]], %[[H]]) <{dot_dimension_numbers = #mhlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>, precision_config = [#mhlo<precision DEFAULT>, #mhlo<precision DEFAULT>]}> : (tensor<16x4xf32>, tensor<16x64xf32>) -> tensor<4x64xf32>
// CHECK-NEXT: %[[T:.*]] = "mhlo.transpose"(%[[D]]) <{permutation = dense<[1, 0]> : tensor<2xi64>}> : (tensor<4x64xf32>) -> tensor<64x4xf32>
// CHECK-NEXT: return %[[T]]
module {
  func.func public @outer_products(%g: tensor<16x4xf32>, %h: tensor<16x64xf32>) -> tensor<64x4xf32> {
    %0 = mhlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = "mhlo.dot_general"(%g, %h) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0]>, precision_config = [#mhlo<precision DEFAULT>, #mhlo<precision DEFAULT>]}> : (tensor<16x4xf32>, tensor<16x64xf32>) -> tensor<16x4x64xf32>
    %2 = "mhlo.transpose"(%1) <{permutation = dense<[0, 2, 1]> : tensor<3xi64>}> : (tensor<16x4x64xf32>) -> tensor<16x64x4xf32>
    %3 = mhlo.reduce(%2 init: %0) applies mhlo.add across dimensions = [0] : (tensor<16x64x4xf32>, tensor<f32>) -> tensor<64x4xf32>
    return %3 : tensor<64x4xf32>
  }
}

// -----

// Straight from the dot, with a contraction of its own: the summed batch
// dimension joins the contracting ones; no transpose is needed.

// CHECK-LABEL: func.func public @direct
// CHECK-SAME: (%[[A:.*]]: tensor<8x3x5xf32>, %[[B:.*]]: tensor<8x5x2xf32>)
// CHECK: %[[D:.*]] = "mhlo.dot_general"(%[[A]], %[[B]]) <{dot_dimension_numbers = #mhlo.dot<lhs_contracting_dimensions = [2, 0], rhs_contracting_dimensions = [1, 0]>}> : (tensor<8x3x5xf32>, tensor<8x5x2xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: return %[[D]]
module {
  func.func public @direct(%a: tensor<8x3x5xf32>, %b: tensor<8x5x2xf32>) -> tensor<3x2xf32> {
    %0 = mhlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = "mhlo.dot_general"(%a, %b) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>}> : (tensor<8x3x5xf32>, tensor<8x5x2xf32>) -> tensor<8x3x2xf32>
    %2 = mhlo.reduce(%1 init: %0) applies mhlo.add across dimensions = [0] : (tensor<8x3x2xf32>, tensor<f32>) -> tensor<3x2xf32>
    return %2 : tensor<3x2xf32>
  }
}

// -----

// Two batch dimensions, the second summed (through a transpose that puts it
// first); the other stays a batch dimension, and the transpose left over is
// the identity. Integers: the same sums, exactly.

// CHECK-LABEL: func.func public @one_of_two
// CHECK-SAME: (%[[A:.*]]: tensor<2x6x3xi32>, %[[B:.*]]: tensor<6x2x4xi32>)
// CHECK: %[[D:.*]] = "mhlo.dot_general"(%[[A]], %[[B]]) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [1], lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> : (tensor<2x6x3xi32>, tensor<6x2x4xi32>) -> tensor<2x3x4xi32>
// CHECK-NOT: mhlo.transpose
// CHECK: return %[[D]]
module {
  func.func public @one_of_two(%a: tensor<2x6x3xi32>, %b: tensor<6x2x4xi32>) -> tensor<2x3x4xi32> {
    %0 = mhlo.constant dense<0> : tensor<i32>
    %1 = "mhlo.dot_general"(%a, %b) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0, 1], rhs_batching_dimensions = [1, 0]>}> : (tensor<2x6x3xi32>, tensor<6x2x4xi32>) -> tensor<2x6x3x4xi32>
    %2 = "mhlo.transpose"(%1) <{permutation = dense<[1, 0, 2, 3]> : tensor<4xi64>}> : (tensor<2x6x3x4xi32>) -> tensor<6x2x3x4xi32>
    %3 = mhlo.reduce(%2 init: %0) applies mhlo.add across dimensions = [0] : (tensor<6x2x3x4xi32>, tensor<i32>) -> tensor<2x3x4xi32>
    return %3 : tensor<2x3x4xi32>
  }
}

// -----

// Both batch dimensions summed at once.

// CHECK-LABEL: func.func public @both
// CHECK: "mhlo.dot_general"(%{{.*}}, %{{.*}}) <{dot_dimension_numbers = #mhlo.dot<lhs_contracting_dimensions = [0, 1], rhs_contracting_dimensions = [1, 0]>}> : (tensor<2x6x3xf32>, tensor<6x2x4xf32>) -> tensor<3x4xf32>
// CHECK-NOT: mhlo.reduce
module {
  func.func public @both(%a: tensor<2x6x3xf32>, %b: tensor<6x2x4xf32>) -> tensor<3x4xf32> {
    %0 = mhlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = "mhlo.dot_general"(%a, %b) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0, 1], rhs_batching_dimensions = [1, 0]>}> : (tensor<2x6x3xf32>, tensor<6x2x4xf32>) -> tensor<2x6x3x4xf32>
    %2 = mhlo.reduce(%1 init: %0) applies mhlo.add across dimensions = [0, 1] : (tensor<2x6x3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
    return %2 : tensor<3x4xf32>
  }
}
