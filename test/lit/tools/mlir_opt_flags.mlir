// mlir-opt's printing and input flags.

// --mlir-print-local-scope prints locations inline instead of as #loc aliases.
// RUN: pxla-opt %s --mlir-print-debuginfo --mlir-print-local-scope | filecheck %s --check-prefix=LOCAL
// LOCAL: mhlo.negate {{.*}} loc("{{.*}}mlir_opt_flags.mlir":35:10)
// LOCAL-NOT: #loc

// --mlir-elide-elementsattrs-if-larger=N elides attributes of more than N elements.
// RUN: pxla-opt %s --mlir-elide-elementsattrs-if-larger=4 | filecheck %s --check-prefix=ELIDE
// ELIDE: pxla.table = dense_resource<__elided__> : tensor<5xi32>
// RUN: pxla-opt %s --mlir-elide-elementsattrs-if-larger=5 | filecheck %s --check-prefix=KEEP
// KEEP: pxla.table = dense<[1, 2, 3, 4, 5]> : tensor<5xi32>
// RUN: not pxla-opt %s --mlir-elide-elementsattrs-if-larger=-1 2>&1 | filecheck %s --check-prefix=ELIDE-BAD
// ELIDE-BAD: pxla-opt: error: argument -mlir-elide-elementsattrs-if-larger/--mlir-elide-elementsattrs-if-larger: expected a non-negative integer, got '-1'

// --emit-bytecode writes MLIR bytecode, and bytecode reads back like text.
// RUN: pxla-opt %s --emit-bytecode -o %t.mlirbc
// RUN: %python -c "import sys; sys.exit(open(sys.argv[1], 'rb').read(4) != b'ML\xefR')" %t.mlirbc
// RUN: pxla-opt %t.mlirbc --pass-pipeline='builtin.module(pxla-verify-handoff)' | filecheck %s --check-prefix=BYTECODE
// BYTECODE: module @flags
// BYTECODE: mhlo.negate
// RUN: not pxla-opt %s --emit-bytecode --split-input-file 2>&1 | filecheck %s --check-prefix=BYTECODE-SPLIT
// BYTECODE-SPLIT: pxla-opt: error: --emit-bytecode writes one module; it cannot be combined with --split-input-file
// RUN: %python -c "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read()[:40])" %t.mlirbc > %t.cut.mlirbc
// RUN: not pxla-opt %t.cut.mlirbc 2>&1 | filecheck %s --check-prefix=BYTECODE-CUT
// BYTECODE-CUT: cut.mlirbc: error: {{.+}}
// BYTECODE-CUT-NOT: Traceback

// Flags are matched in full, as by mlir-opt: no abbreviations.
// RUN: not pxla-opt %s -verify-diag 2>&1 | filecheck %s --check-prefix=ABBREV
// RUN: not pxla-opt %s --mlir-print-ir-aft 2>&1 | filecheck %s --check-prefix=ABBREV
// ABBREV: pxla-opt: error: unrecognized arguments: {{-?}}-{{verify-diag|mlir-print-ir-aft}} (see pxla-opt --help)
module @flags attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32, pxla.table = dense<[1, 2, 3, 4, 5]> : tensor<5xi32>} {
  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %0 = mhlo.negate %x : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
