// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-convert-op-shardings-to-sdy)' | filecheck %s

// A callback in global code runs once, on device 2; a replicated op sharding
// says nothing Shardy needs.
// CHECK-LABEL: func.func public @maximal
// CHECK: mhlo.custom_call @callback(%arg0) {has_side_effect = true, sdy.sharding = #sdy.sharding_per_value<[<mesh<[], device_ids=[2]>, []>]>} : (tensor<2xf32>) -> ()
// CHECK: mhlo.add %arg0, %arg0 : tensor<2xf32>
// CHECK-NOT: mhlo.sharding
module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @maximal(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    mhlo.custom_call @callback(%arg0) {has_side_effect = true, mhlo.sharding = "{maximal device=2}"} : (tensor<2xf32>) -> ()
    %0 = mhlo.add %arg0, %arg0 {mhlo.sharding = "{replicated}"} : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

// Per-device code (inside a manual computation): every device calls back;
// one replicated entry per result, closed dims for ranked ones.
// CHECK-LABEL: func.func private @per_device
// CHECK: sdy.sharding = #sdy.sharding_per_value<[<mesh<[]>, []>, <mesh<[]>, [{}, {}]>]>
// CHECK-SAME: (!mhlo.token, tensor<1x3xf32>) -> (!mhlo.token, tensor<1x3xf32>)
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["i"=2]>
  func.func private @per_device(%t: !mhlo.token, %x: tensor<1x3xf32>) -> tensor<1x3xf32> {
    %0:2 = mhlo.custom_call @callback(%t, %x) {has_side_effect = true, mhlo.sharding = "{manual}"} : (!mhlo.token, tensor<1x3xf32>) -> (!mhlo.token, tensor<1x3xf32>)
    return %0#1 : tensor<1x3xf32>
  }
  func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"i"}, {}]>] out_shardings=[<@mesh, [{"i"}, {}]>] manual_axes={"i"} (%arg1: tensor<1x3xf32>) {
      %t = mhlo.create_token : !mhlo.token
      %1 = func.call @per_device(%t, %arg1) : (!mhlo.token, tensor<1x3xf32>) -> tensor<1x3xf32>
      sdy.return %1 : tensor<1x3xf32>
    } : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %0 : tensor<2x3xf32>
  }
}
