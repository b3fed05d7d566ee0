// The verifier itself: a missing and an unexpected diagnostic both fail the
// run, with line numbers of this file (after --split-input-file too).

// RUN: not pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-verify-handoff)' 2>&1 | filecheck %s

// A correct expectation is silent.
// CHECK-NOT: verify_diagnostics.mlir:{{[89]}}:
// expected-error @+1 {{module has no 'mhlo.num_replicas' attribute}}
module @expected_and_met {
}

// -----

// The error is real but expected on the wrong line.
// CHECK-DAG: verify_diagnostics.mlir:17:1: error: unexpected error: module has no 'mhlo.num_replicas' attribute
// CHECK-DAG: verify_diagnostics.mlir:18:4: error: expected error "module has no 'mhlo.num_replicas' attribute" on line 19 was not produced
module @wrong_line {
// expected-error @+1 {{module has no 'mhlo.num_replicas' attribute}}
}

// -----

// Nothing fails here, so the expectation is unmet.
// CHECK-DAG: verify_diagnostics.mlir:25:4: error: expected warning "never emitted" on line 26 was not produced
// expected-warning @+1 {{never emitted}}
module @nothing_fails attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
}

// -----

// @above / @below skip other expectation lines; -re takes regular expressions.
module @designators attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main() -> (tensor<ui32>, tensor<ui32>, tensor<ui32>) {
    // expected-warning-re @below {{num_replicas = {{[0-9]+}}; did you mean partition_id}}
    // expected-warning @+2 {{always 0}}
    %0 = mhlo.replica_id : tensor<ui32>
    %1 = mhlo.replica_id : tensor<ui32>
    %2 = mhlo.replica_id : tensor<ui32>
    // expected-warning @above {{did you mean}}
    return %0, %1, %2 : tensor<ui32>, tensor<ui32>, tensor<ui32>
  }
}

// CHECK-NOT: error
