// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-convert-op-shardings-to-sdy,pxla-verify-handoff)'
// A host callback's GSPMD sharding on a device the module does not have:
// refused in the Shardy form (device_ids=[99]) as in the GSPMD form, before
// XLA's HLO verifier meets it inside the compile.

module @callback_device_out_of_range attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{mhlo.custom_call has sdy.sharding = #sdy.sharding_per_value<[<mesh<[], device_ids=[99]>, []>]>: device 99 is out of range for num_partitions = 4}}
    mhlo.custom_call @callback(%x) {has_side_effect = true, mhlo.sharding = "{maximal device=99}"} : (tensor<2xf32>) -> ()
    return %x : tensor<2xf32>
  }
}

// -----

module @callback_last_device attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    mhlo.custom_call @callback(%x) {has_side_effect = true, mhlo.sharding = "{maximal device=3}"} : (tensor<2xf32>) -> ()
    return %x : tensor<2xf32>
  }
}
