// Chunks are processed separately, outputs joined by '// -----', and
// diagnostics point at lines of this file.

// RUN: not pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-verify-handoff)' 2>%t.err | filecheck %s
// RUN: filecheck %s --check-prefix=ERR < %t.err

// CHECK: module @first attributes {{.*}} {{{$}}
// CHECK-NEXT: {{^}}}{{$}}
// CHECK-NEXT: {{^}}// -----{{$}}
// CHECK-NEXT: {{^}}module @third
module @first attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
}

// -----

// ERR: split_input_file.mlir:17:1: error: module has no 'mhlo.num_replicas' attribute
module @second {
}

// -----

module @third attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
}

// -----

// A parse error in a later chunk keeps its real line number too.
// ERR: split_input_file.mlir:30:3: error: custom op 'bogus' is unknown
module @fourth {
  bogus
}
