// --mlir-pass-statistics: every pass of the pipeline in order, pxla passes with the counters they declare,
// as mlir-opt prints its report (jaxlib's passes are named, without counts: its bindings keep none).
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-fold-shard-of-unshard,pxla-expand-shard,cse)' --mlir-pass-statistics -o %t 2>&1 | filecheck %s
// CHECK: ===-------------------------------------------------------------------------===
// CHECK-NEXT: {{ +}}... Pass statistics report ...
// CHECK-NEXT: ===-------------------------------------------------------------------------===
// CHECK-NEXT: 'builtin.module' Pipeline
// CHECK-NEXT:   FoldShardOfUnshardPass
// CHECK-NEXT:     (shards-folded) 0 - pxla.shard of a pxla.unshard folded to the unsharded value
// CHECK-NEXT:   ExpandShardPass
// CHECK-NEXT:     (shards-expanded) 2 - pxla.shard placeholders expanded into this device's slice
// CHECK-NEXT:   cse

// Without the flag, nothing is reported.
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-expand-shard)' -o %t 2>&1 | filecheck %s --check-prefix=QUIET --allow-empty
// QUIET-NOT: statistics

module @stats attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<8x3xf32>, %y: tensor<8xi32>) -> (tensor<3xf32>, tensor<i32>) {
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf32>
    %1 = mhlo.custom_call @pxla.shard(%y) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8xi32>) -> tensor<i32>
    return %0, %1 : tensor<3xf32>, tensor<i32>
  }
}
