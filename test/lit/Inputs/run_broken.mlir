// Does not parse (line 4): for pxla-mlir run's error tests.
module {
  func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    %0 = mhlo.bogus %a
