// Parses and verifies, but XLA has no such custom call: for pxla-mlir run's error tests.
module {
  func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    %0 = mhlo.custom_call @no_such_target(%a) : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
