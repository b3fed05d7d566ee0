// pxla-mlir reduce end to end. Every StableHLO op below fails pxla-verify-handoff;
// reduced while the chlo.erf error stays, the module keeps the erf alone, and the
// lit test it emits passes pxla-opt --verify-diagnostics.

// RUN: pxla-mlir reduce %s --pipeline='builtin.module(pxla-verify-handoff)' --expect-error 'chlo\.erf' --jobs 2 -o %t.mlir --emit-lit-test %t.test.mlir 2> %t.err
// RUN: filecheck %s --input-file=%t.mlir
// RUN: filecheck %s --check-prefix=SUMMARY --input-file=%t.err
// RUN: filecheck %s --check-prefix=LIT --input-file=%t.test.mlir
// RUN: pxla-opt %t.test.mlir --pass-pipeline='builtin.module(pxla-verify-handoff)' --verify-diagnostics

// CHECK-LABEL: func.func public @main(
// CHECK-NEXT: chlo.erf %arg0
// CHECK-NEXT: return
// CHECK-NOT: stablehlo
// SUMMARY: pxla-mlir reduce: {{.*}}reduce.mlir: 8 ops -> 3 ops in
// LIT: // {{RUN}}: pxla-opt %s --pass-pipeline='builtin.module(pxla-verify-handoff)' --verify-diagnostics
// LIT: // expected-error @below {{.}}{'chlo.erf' is not builtin/func/mhlo

// A shell test gives the same module; an input the test does not find interesting is one error, exit 2, and
// nothing is written.
// RUN: pxla-mlir reduce %s --test "pxla-opt {} -p 'builtin.module(pxla-verify-handoff)' 2>&1 | grep -q chlo.erf" | filecheck %s
// RUN: rm -f %t.none
// RUN: not pxla-mlir reduce %s --test 'grep -q no_such[_]op' -o %t.none 2>&1 | filecheck %s --check-prefix=BORING
// RUN: not ls %t.none
// BORING: pxla-mlir: error: {{.*}}reduce.mlir is not interesting: the test exits 1; the test must succeed on the input

module @per_device_psum attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<i32>) {
    %0 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    %1 = chlo.erf %0 : tensor<3xf32> -> tensor<3xf32>
    %2 = stablehlo.partition_id : tensor<ui32>
    %3 = stablehlo.convert %2 : (tensor<ui32>) -> tensor<i32>
    return %1, %3 : tensor<3xf32>, tensor<i32>
  }
}
