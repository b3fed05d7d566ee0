// Chunks are processed separately, outputs joined by '// -----', and
// diagnostics point at lines of this file.

// RUN: not pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-verify-handoff)' 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=ERR < %t.err

// CHECK: module @first attributes {{.*}} {{{$}}
// CHECK-NEXT: func.func public @main() {
// CHECK: {{^}}}{{$}}
// CHECK-NEXT: {{^}}// -----{{$}}
// CHECK-NEXT: {{^}}module @third
module @first attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main() {
    return
  }
}

// -----

// ERR: split_input_file.mlir:21:1: error: module has no 'mhlo.num_replicas' attribute
module @second {
}

// -----

module @third attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main() {
    return
  }
}

// -----

// A parse error in a later chunk keeps its real line number too.
// ERR: split_input_file.mlir:37:3: error: custom op 'bogus' is unknown
module @fourth {
  bogus
}

// A marker of one's own, for input and output (mlir-opt's
// --split-input-file=MARKER and --output-split-marker=MARKER); the default
// marker is then plain text, and '--split-input-file FILE' still reads FILE.
// RUN: printf 'module @a {\n}\n// cut here\nmodule @b {\n}\n// -----\nmodule @c {\n}\n' > %t.marker.mlir
// RUN: pxla-opt --split-input-file='// cut here' --output-split-marker='// =====' %t.marker.mlir | filecheck %s --check-prefix=MARKER
// MARKER: {{^}}module @a {
// MARKER-NEXT: {{^}}}
// MARKER-NEXT: {{^}}// ====={{$}}
// MARKER-NEXT: {{^}}module {
// MARKER-NEXT: module @b
// MARKER: module @c
// RUN: pxla-opt --split-input-file %t.marker.mlir | filecheck %s --check-prefix=DEFAULT
// DEFAULT: module @b
// DEFAULT-NEXT: }
// DEFAULT-NEXT: }
// DEFAULT-NEXT: {{^}}// -----{{$}}
// DEFAULT-NEXT: {{^}}module @c
// RUN: not pxla-opt --split-input-file= %t.marker.mlir 2>&1 | filecheck %s --check-prefix=EMPTY
// EMPTY: pxla-opt: error: --split-input-file= needs a marker, e.g. --split-input-file='// -----'
