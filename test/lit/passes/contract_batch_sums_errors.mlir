// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-contract-batch-sums)'
// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-contract-batch-sums)' | filecheck %s

// The pass reports nothing of its own: reduces that are not a sum of a dot's
// batch dimensions (and dots whose batched product is used anyway) stay as
// they are, without a diagnostic.

// CHECK-LABEL: func.func public @free_dimension
// CHECK: lhs_batching_dimensions = [0]
// CHECK: mhlo.reduce
module {
  func.func public @free_dimension(%g: tensor<16x4xf32>, %h: tensor<16x64xf32>) -> tensor<16x64xf32> {
    %0 = mhlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = "mhlo.dot_general"(%g, %h) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0]>}> : (tensor<16x4xf32>, tensor<16x64xf32>) -> tensor<16x4x64xf32>
    %2 = mhlo.reduce(%1 init: %0) applies mhlo.add across dimensions = [1] : (tensor<16x4x64xf32>, tensor<f32>) -> tensor<16x64xf32>
    return %2 : tensor<16x64xf32>
  }
}

// -----

// A batch and a free dimension summed together.

// CHECK-LABEL: func.func public @batch_and_free
// CHECK: lhs_batching_dimensions = [0]
// CHECK: mhlo.reduce
module {
  func.func public @batch_and_free(%g: tensor<16x4xf32>, %h: tensor<16x64xf32>) -> tensor<64xf32> {
    %0 = mhlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = "mhlo.dot_general"(%g, %h) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0]>}> : (tensor<16x4xf32>, tensor<16x64xf32>) -> tensor<16x4x64xf32>
    %2 = mhlo.reduce(%1 init: %0) applies mhlo.add across dimensions = [0, 1] : (tensor<16x4x64xf32>, tensor<f32>) -> tensor<64xf32>
    return %2 : tensor<64xf32>
  }
}

// -----

// Starting from one, from -0.0 (a sum of -0.0s stays -0.0; a dot's is +0.0), or taking the max.

// CHECK-LABEL: func.func public @not_a_sum_from_zero
// CHECK-COUNT-3: mhlo.reduce
module {
  func.func public @not_a_sum_from_zero(%g: tensor<16x4xf32>, %h: tensor<16x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>) {
    %one = mhlo.constant dense<1.000000e+00> : tensor<f32>
    %neg = mhlo.constant dense<-0.000000e+00> : tensor<f32>
    %zero = mhlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = "mhlo.dot_general"(%g, %h) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0]>}> : (tensor<16x4xf32>, tensor<16x64xf32>) -> tensor<16x4x64xf32>
    %2 = "mhlo.dot_general"(%g, %h) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0]>}> : (tensor<16x4xf32>, tensor<16x64xf32>) -> tensor<16x4x64xf32>
    %3 = "mhlo.dot_general"(%g, %h) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0]>}> : (tensor<16x4xf32>, tensor<16x64xf32>) -> tensor<16x4x64xf32>
    %4 = mhlo.reduce(%1 init: %one) applies mhlo.add across dimensions = [0] : (tensor<16x4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
    %5 = mhlo.reduce(%2 init: %neg) applies mhlo.add across dimensions = [0] : (tensor<16x4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
    %6 = mhlo.reduce(%3 init: %zero) applies mhlo.maximum across dimensions = [0] : (tensor<16x4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
    return %4, %5, %6 : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>
  }
}

// -----

// The batched product is returned too: it is computed anyway.

// CHECK-LABEL: func.func public @product_used
// CHECK: lhs_batching_dimensions = [0]
// CHECK: mhlo.reduce
module {
  func.func public @product_used(%g: tensor<16x4xf32>, %h: tensor<16x64xf32>) -> (tensor<4x64xf32>, tensor<16x4x64xf32>) {
    %0 = mhlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = "mhlo.dot_general"(%g, %h) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0]>}> : (tensor<16x4xf32>, tensor<16x64xf32>) -> tensor<16x4x64xf32>
    %2 = mhlo.reduce(%1 init: %0) applies mhlo.add across dimensions = [0] : (tensor<16x4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
    return %2, %1 : tensor<4x64xf32>, tensor<16x4x64xf32>
  }
}

// -----

// Two operands reduced together (a variadic reduce), and a reduce of an argument.

// CHECK-LABEL: func.func public @variadic
// CHECK: lhs_batching_dimensions = [0]
// CHECK: mhlo.reduce
module {
  func.func public @variadic(%g: tensor<16x4xf32>, %h: tensor<16x64xf32>, %x: tensor<16x4x64xf32>) -> (tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>) {
    %0 = mhlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = "mhlo.dot_general"(%g, %h) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0]>}> : (tensor<16x4xf32>, tensor<16x64xf32>) -> tensor<16x4x64xf32>
    %2:2 = mhlo.reduce(%1 init: %0), (%x init: %0) across dimensions = [0] : (tensor<16x4x64xf32>, tensor<16x4x64xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x64xf32>, tensor<4x64xf32>)
     reducer(%a: tensor<f32>, %c: tensor<f32>) (%b: tensor<f32>, %d: tensor<f32>) {
      %s = mhlo.add %a, %c : tensor<f32>
      %t = mhlo.add %b, %d : tensor<f32>
      mhlo.return %s, %t : tensor<f32>, tensor<f32>
    }
    %3 = mhlo.reduce(%x init: %0) applies mhlo.add across dimensions = [0] : (tensor<16x4x64xf32>, tensor<f32>) -> tensor<4x64xf32>
    return %2#0, %2#1, %3 : tensor<4x64xf32>, tensor<4x64xf32>, tensor<4x64xf32>
  }
}

// -----

// Complex numbers (a psum of complex outer products): the bindings cannot
// read a complex constant, so the sum stays a reduce (it used to stop the
// pipeline with an internal error).

// CHECK-LABEL: func.func public @complex_sum
// CHECK: lhs_batching_dimensions = [0]
// CHECK: mhlo.reduce
module {
  func.func public @complex_sum(%g: tensor<16x4xcomplex<f32>>, %h: tensor<16x2xcomplex<f32>>) -> tensor<4x2xcomplex<f32>> {
    %0 = mhlo.constant dense<(0.000000e+00,0.000000e+00)> : tensor<complex<f32>>
    %1 = "mhlo.dot_general"(%g, %h) <{dot_dimension_numbers = #mhlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0]>}> : (tensor<16x4xcomplex<f32>>, tensor<16x2xcomplex<f32>>) -> tensor<16x4x2xcomplex<f32>>
    %2 = mhlo.reduce(%1 init: %0) applies mhlo.add across dimensions = [0] : (tensor<16x4x2xcomplex<f32>>, tensor<complex<f32>>) -> tensor<4x2xcomplex<f32>>
    return %2 : tensor<4x2xcomplex<f32>>
  }
}
