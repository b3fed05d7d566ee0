// RUN: pxla-opt %s --verify-diagnostics --load-pass-plugin=%S/../../../examples/plugins/collective_bytes.py -p 'builtin.module(collective-bytes)' | filecheck %s
// RUN: pxla-opt %s --load-pass-plugin=%S/../../../examples/plugins/collective_bytes.py -p 'builtin.module(collective-bytes{json=%t.json})' -o %t.mlir 2>/dev/null
// RUN: cat %t.json | filecheck %s --check-prefix=JSON

// A report: the module is unchanged, every collective gets a remark with its bytes (per device, and in all)
// under the formulas of the pass's docstring, and json= writes the same with totals.

// CHECK-LABEL: func.func public @main
// CHECK-NEXT: "mhlo.all_gather"(%arg0)
// CHECK-NEXT: "mhlo.all_reduce"(%arg1)
// CHECK: "stablehlo.all_gather"(%arg2)
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<1x3xi32>, %y: tensor<8x4xf32>, %b: tensor<16xi1>, %c: tensor<2xcomplex<f32>>) -> (tensor<4x3xi32>, tensor<8x4xf32>, tensor<2x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<32xi1>, tensor<2xcomplex<f32>>, tensor<8x4xf32>, tensor<8x4xf32>) {
    // Cross-replica groups repeat in each of the 2 partitions: devices {0, 2, 4, 6} and {1, 3, 5, 7}.
    // expected-remark @+1 {{all_gather: 2 groups of 4 devices; per device 12 B in, 48 B out, 36 B sent (ring: (n-1) * in); 288 B sent in all}}
    %0 = "mhlo.all_gather"(%x) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}> : (tensor<1x3xi32>) -> tensor<4x3xi32>
    // expected-remark @+1 {{all_reduce: 1 group of 8 devices; per device 128 B in, 128 B out, 224 B sent (ring: 2(n-1)/n * in); 1792 B sent in all}}
    %1 = "mhlo.all_reduce"(%y) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %d: tensor<f32>):
      %s = mhlo.add %a, %d : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<8x4xf32>) -> tensor<8x4xf32>
    // expected-remark @+1 {{reduce_scatter: 2 groups of 4 devices; per device 128 B in, 32 B out, 96 B sent (ring: (n-1)/n * in); 768 B sent in all}}
    %2 = "mhlo.reduce_scatter"(%y) <{channel_handle = #mhlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>, scatter_dimension = 0 : i64, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %d: tensor<f32>):
      %s = mhlo.add %a, %d : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<8x4xf32>) -> tensor<2x4xf32>
    // A channel makes all_to_all's ids partitions: groups of the 2 partitions, in each of 4 replicas.
    // expected-remark @+1 {{all_to_all: 4 groups of 2 devices; per device 128 B in, 128 B out, 64 B sent ((n-1)/n * in); 512 B sent in all}}
    %3 = "mhlo.all_to_all"(%y) <{channel_handle = #mhlo.channel_handle<handle = 3, type = 1>, concat_dimension = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 0 : i64}> : (tensor<8x4xf32>) -> tensor<8x4xf32>
    // (r, r) sends nothing; the pairs repeat in both partitions.
    // expected-remark @+1 {{collective_permute: 6 pairs (4 between different devices); per device 128 B in, 128 B out, 128 B sent (in per pair); 512 B sent in all}}
    %4 = "mhlo.collective_permute"(%y) <{source_target_pairs = dense<[[0, 1], [1, 0], [2, 2]]> : tensor<3x2xi64>}> : (tensor<8x4xf32>) -> tensor<8x4xf32>
    // A pred is a byte, as XLA stores it; 2022's cross-replica-sum is an all_reduce.
    // expected-remark @+1 {{all_gather: 4 groups of 2 devices; per device 16 B in, 32 B out, 16 B sent (ring: (n-1) * in); 128 B sent in all}}
    %5 = "stablehlo.all_gather"(%b) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>}> : (tensor<16xi1>) -> tensor<32xi1>
    // expected-remark @+1 {{cross-replica-sum: 8 groups of 1 devices; per device 16 B in, 16 B out, 0 B sent (ring: 2(n-1)/n * in); 0 B sent in all}}
    %6 = "mhlo.cross-replica-sum"(%c) <{replica_groups = dense<[[0], [1], [2], [3]]> : tensor<4x1xi64>}> : (tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>>
    // A variadic op counts all its operands; empty groups are every replica.
    // expected-remark @+1 {{all_reduce: 2 groups of 4 devices; per device 256 B in, 256 B out, 384 B sent (ring: 2(n-1)/n * in); 3072 B sent in all}}
    %7:2 = "mhlo.all_reduce"(%y, %y) <{replica_groups = dense<> : tensor<0x0xi64>}> ({
    ^bb0(%a: tensor<f32>, %d: tensor<f32>):
      %s = mhlo.add %a, %d : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<8x4xf32>, tensor<8x4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>)
    return %0, %1, %2, %3, %4, %5, %6, %7#0, %7#1 : tensor<4x3xi32>, tensor<8x4xf32>, tensor<2x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<32xi1>, tensor<2xcomplex<f32>>, tensor<8x4xf32>, tensor<8x4xf32>
  }
}

// JSON: "num_replicas": 4,
// JSON: "num_partitions": 2,
// JSON: "op": "mhlo.all_gather",
// JSON: "mode": "cross-replica",
// JSON: "bytes_sent_per_device": 36,
// JSON: "bytes_sent_total": 288
// JSON: "totals": {
// JSON-NEXT: "ops": 8,
// JSON-NEXT: "bytes_sent_total": 7072,
// JSON: "by_op": {
// JSON: "all_reduce": {
// JSON-NEXT: "ops": 2,
// JSON-NEXT: "bytes_sent_total": 4864
// JSON: "by_groups": {
