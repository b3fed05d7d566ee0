// The lines pxla-mlir gen-checks writes check the module they came from
// (under the FileCheck this run uses, PyPI's or LLVM's) and fail on another
// replica count or replica group.

// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-handoff-pipeline)' -o %t.out
// RUN: pxla-mlir gen-checks %t.out -o %t.checks
// RUN: filecheck %t.checks --input-file=%t.out
// RUN: sed 's/mhlo.num_replicas = 4/mhlo.num_replicas = 2/' %t.out > %t.replicas
// RUN: not filecheck %t.checks --input-file=%t.replicas
// RUN: sed 's/\[\[0, 1, 2, 3\]\]/[[0, 1], [2, 3]]/' %t.out > %t.groups
// RUN: not filecheck %t.checks --input-file=%t.groups
// The checks name values by their op, and capture the module's attributes.
// RUN: filecheck %s --input-file=%t.checks

// CHECK{LITERAL}: // CHECK-SAME:    mhlo.num_replicas = 4 : i32} {
// CHECK{LITERAL}: %[[ALL_REDUCE:[0-9A-Za-z_$.-]+]] = "mhlo.all_reduce"(%[[ARG0]])
module @per_device_psum attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
    %0 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    return %0, %0 : tensor<3xf32>, tensor<3xf32>
  }
}
