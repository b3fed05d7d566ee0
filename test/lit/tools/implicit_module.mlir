// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-verify-handoff)'

// A chunk without a 'module' is wrapped in one, which MLIR locates at line 0;
// its diagnostics are reported at the chunk's first line of code instead.

// expected-error @+1 {{module has no 'mhlo.num_replicas' attribute}}
func.func @first() {
  return
}

// -----

// expected-error @+3 {{module has no 'mhlo.num_replicas' attribute}}
// The first line of code of this chunk is three lines below.

  func.func @second() {
    return
  }

// --no-implicit-module: the input is its one top-level op, printed as it is.
// RUN: printf 'func.func @alone() {\n  return\n}\n' > %t.func.mlir
// RUN: pxla-opt %t.func.mlir --no-implicit-module | filecheck %s --check-prefix=NO-IMPLICIT
// NO-IMPLICIT: {{^}}func.func @alone() {
// NO-IMPLICIT-NOT: module
// RUN: pxla-opt %t.func.mlir | filecheck %s --check-prefix=IMPLICIT
// IMPLICIT: {{^}}module {
// RUN: not pxla-opt %t.func.mlir --no-implicit-module --pass-pipeline='builtin.module(cse)' 2>&1 | filecheck %s --check-prefix=NOT-A-MODULE
// NOT-A-MODULE: func.mlir:1:1: error: the top-level operation is 'func.func', but the pass pipeline runs on 'builtin.module'; wrap the input in a module or drop --no-implicit-module
// RUN: printf 'func.func @f() {\n  return\n}\nfunc.func @g() {\n  return\n}\n' > %t.two.mlir
// RUN: not pxla-opt %t.two.mlir --no-implicit-module 2>&1 | filecheck %s --check-prefix=TWO
// TWO: two.mlir:1:1: error: source must contain a single top-level operation, found: 2
