// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-elide-trivial-collectives)'

// Over groups of one device an all_gather returns its operand: a result
// twice as large cannot be (XLA would refuse the module in its compile).

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @gather_too_large(%x: tensor<4x2xf32>) -> tensor<8x2xf32> {
    // expected-error @+1 {{mhlo.all_gather over groups of one device returns its operand (tensor<4x2xf32>), but its result is tensor<8x2xf32>; XLA would refuse this module. Over a size-1 axis the result has the operand's shape}}
    %0 = "mhlo.all_gather"(%x) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0], [1]]> : tensor<2x1xi64>}> : (tensor<4x2xf32>) -> tensor<8x2xf32>
    return %0 : tensor<8x2xf32>
  }
}

// -----

// Each operand of a variadic all_gather is checked, and named.

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @variadic(%x: tensor<4xf32>, %y: tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    // expected-error @+1 {{mhlo.all_gather over groups of one device returns operand 1 (tensor<2xf32>), but its result is tensor<4xf32>}}
    %0:2 = "mhlo.all_gather"(%x, %y) <{all_gather_dim = 0 : i64, replica_groups = dense<0> : tensor<1x1xi64>}> : (tensor<4xf32>, tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// A reduce_scatter is never touched, not even one XLA would refuse (its
// result is half its operand over groups of one device): no diagnostic here.

module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @scatter_left_alone(%x: tensor<4x2xf32>) -> tensor<2x2xf32> {
    %0 = "mhlo.reduce_scatter"(%x) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0], [1]]> : tensor<2x1xi64>, scatter_dimension = 0 : i64, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = mhlo.add %l, %r : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<4x2xf32>) -> tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
}
