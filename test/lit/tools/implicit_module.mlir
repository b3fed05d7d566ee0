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
