// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-inline-manual-computations)'

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["i"=2]>
  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{sdy.manual_computation in a module with mhlo.num_partitions = 1 has a tile of type tensor<1xf32> for a global value of type tensor<2xf32>; with one partition every mesh axis must have size 1}}
    %0 = sdy.manual_computation(%x) in_shardings=[<@mesh, [{"i"}]>] out_shardings=[<@mesh, [{"i"}]>] manual_axes={"i"} (%t: tensor<1xf32>) {
      sdy.return %t : tensor<1xf32>
    } : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
