// jaxlib 0.12's canonicalize aborts the process (Shardy: "Check failed: mesh
// expected inputs and outputs to have a common mesh") on a manual computation
// whose shardings name two meshes with axes; a guard before it reports the op.
// One mesh, by symbol and written out, or a mesh without axes beside it (the
// rule Shardy's verifier applies when the op has manual axes): the module is
// canonicalized as before.

// RUN: not pxla-opt %s -split-input-file -canonicalize -o /dev/null 2>&1 | filecheck %s
// CHECK: guard_manual_computation_meshes.mlir:18:10: error: sdy.manual_computation names 2 different meshes in its in_shardings and out_shardings (#sdy.mesh<["x"=2]>, @mesh), and canonicalize (in this pipeline) aborts the process on it; give every sharding of the op one mesh
// CHECK-NOT: error

// RUN: not pxla-opt %s -split-input-file -canonicalize 2>/dev/null | filecheck %s --check-prefix=ONE
// ONE: module @one_mesh
// ONE: module @without_axes
module @two_meshes {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = sdy.manual_computation(%x) in_shardings=[<mesh<["x"=2]>, [{}]>] out_shardings=[<@mesh, [{}]>] manual_axes={} (%t: tensor<8xf32>) {
      sdy.return %t : tensor<8xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module @one_mesh {
  sdy.mesh @mesh = <["x"=4]>
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = sdy.manual_computation(%x) in_shardings=[<mesh<["x"=4]>, [{"x"}]>] out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"} (%t: tensor<2xf32>) {
      sdy.return %t : tensor<2xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module @without_axes {
  sdy.mesh @mesh = <["x"=4]>
  sdy.mesh @empty = <[]>
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = sdy.manual_computation(%x) in_shardings=[<@empty, [{}]>] out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"} (%t: tensor<8xf32>) {
      %1 = stablehlo.slice %t [0:2] : (tensor<8xf32>) -> tensor<2xf32>
      sdy.return %1 : tensor<2xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
