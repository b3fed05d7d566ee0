// Bad input: one located error line each, exit 1, no traceback.

// RUN: not pxla-opt %t.does-not-exist.mlir 2>&1 | filecheck %s --check-prefix=MISSING
// MISSING: pxla-opt: error: could not open input file '{{.*}}does-not-exist.mlir': No such file or directory

// RUN: not pxla-opt %s 2>&1 | filecheck %s --check-prefix=PARSE
// PARSE: input_errors.mlir:19:14: error: operation being parsed with an unregistered dialect
// PARSE-NOT: Traceback

// With --allow-unregistered-dialect the op parses, and the handoff verifier
// names it.
// RUN: not pxla-opt %s --allow-unregistered-dialect --pass-pipeline='builtin.module(pxla-verify-handoff)' 2>&1 | filecheck %s --check-prefix=UNREG
// UNREG: input_errors.mlir:19:5: error: 'foo.bar' is not builtin/func/mhlo

// RUN: pxla-opt %s --allow-unregistered-dialect | filecheck %s --check-prefix=ROUNDTRIP
// ROUNDTRIP: "foo.bar"
module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main() {
    "foo.bar"() : () -> ()
    return
  }
}
