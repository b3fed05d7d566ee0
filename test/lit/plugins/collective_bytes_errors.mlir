// RUN: pxla-opt %s --split-input-file --verify-diagnostics --load-pass-plugin=%S/../../../examples/plugins/collective_bytes.py -p 'builtin.module(collective-bytes{json=%S})'

// json= names a directory: the pass fails at the module, saying how to fix it (after its remarks).

// expected-error @+1 {{collective-bytes cannot write json=}}
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%x: tensor<2xf32>) -> tensor<4xf32> {
    // expected-remark @+1 {{all_gather: 1 group of 2 devices; per device 8 B in, 16 B out, 8 B sent (ring: (n-1) * in); 16 B sent in all}}
    %0 = "mhlo.all_gather"(%x) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> : (tensor<2xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

// A dynamic dimension: the op is reported without sizes (and the json still fails, as above).

// expected-error @+1 {{give a writable path, e.g. json=bytes.json}}
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @dynamic(%x: tensor<?xf32>) -> tensor<?xf32> {
    // expected-remark @+1 {{all_reduce: 1 group of 2 devices; per device ? B in, ? B out, ? B sent (ring: 2(n-1)/n * in); ? B sent in all}}
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<?xf32>) -> tensor<?xf32>
    return %0 : tensor<?xf32>
  }
}
