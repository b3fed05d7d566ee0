// RUN: pxla-opt %s --split-input-file --verify-diagnostics --load-pass-plugin=%S/../../../examples/plugins/unshard_as_all_gather.py -p 'builtin.module(unshard-as-all-gather)' | filecheck %s

// The pass never fails: what is not exactly the unshard pattern stays as it is. An all-reduce of a
// dynamic_update_slice (a near miss) gets a remark saying why; any other all-reduce gets nothing.

// The devices write in the wrong order for the all_gather: replica 1 writes slot 0 (replica_id / 2).
// CHECK-LABEL: func.func public @wrong_order
// CHECK: "mhlo.all_reduce"
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @wrong_order(%v: tensor<1x3xi32>) -> tensor<2x3xi32> {
    %z = mhlo.constant dense<0> : tensor<2x3xi32>
    %r = mhlo.replica_id : tensor<ui32>
    %c2 = mhlo.constant dense<2> : tensor<ui32>
    %m = mhlo.divide %r, %c2 : tensor<ui32>
    %c0 = mhlo.constant dense<0> : tensor<ui32>
    %p = mhlo.dynamic_update_slice %z, %v, %m, %c0 : (tensor<2x3xi32>, tensor<1x3xi32>, tensor<ui32>, tensor<ui32>) -> tensor<2x3xi32>
    // expected-remark @+1 {{unshard-as-all-gather: left alone: device 1 (replica 1, partition 0) writes at index 0 of dimension 0, but its place in its group is 1}}
    %s = "mhlo.all_reduce"(%p) <{replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>}> ({
    ^bb0(%a: tensor<i32>, %c: tensor<i32>):
      %t = mhlo.add %a, %c : tensor<i32>
      mhlo.return %t : tensor<i32>
    }) : (tensor<2x3xi32>) -> tensor<2x3xi32>
    return %s : tensor<2x3xi32>
  }
}

// -----

// Not zeros underneath: the sum would add them in.
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @not_zeros(%v: tensor<1x3xi32>) -> tensor<2x3xi32> {
    %z = mhlo.constant dense<1> : tensor<2x3xi32>
    %r = mhlo.replica_id : tensor<ui32>
    %c0 = mhlo.constant dense<0> : tensor<ui32>
    %p = mhlo.dynamic_update_slice %z, %v, %r, %c0 : (tensor<2x3xi32>, tensor<1x3xi32>, tensor<ui32>, tensor<ui32>) -> tensor<2x3xi32>
    // expected-remark @+1 {{left alone: it writes into a constant that is not zeros}}
    %s = "mhlo.all_reduce"(%p) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<i32>, %c: tensor<i32>):
      %t = mhlo.add %a, %c : tensor<i32>
      mhlo.return %t : tensor<i32>
    }) : (tensor<2x3xi32>) -> tensor<2x3xi32>
    return %s : tensor<2x3xi32>
  }
}

// -----

// A max is no gather (zeros would win over negative values).
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @max_reduction(%v: tensor<1x3xi32>) -> tensor<2x3xi32> {
    %z = mhlo.constant dense<0> : tensor<2x3xi32>
    %r = mhlo.replica_id : tensor<ui32>
    %c0 = mhlo.constant dense<0> : tensor<ui32>
    %p = mhlo.dynamic_update_slice %z, %v, %r, %c0 : (tensor<2x3xi32>, tensor<1x3xi32>, tensor<ui32>, tensor<ui32>) -> tensor<2x3xi32>
    // expected-remark @+1 {{left alone: its reduction is not a single add}}
    %s = "mhlo.all_reduce"(%p) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<i32>, %c: tensor<i32>):
      %t = mhlo.maximum %a, %c : tensor<i32>
      mhlo.return %t : tensor<i32>
    }) : (tensor<2x3xi32>) -> tensor<2x3xi32>
    return %s : tensor<2x3xi32>
  }
}

// -----

// A channel without use_global_device_ids over 2 partitions: each group spans replicas and every
// partition, an order this pass does not rewrite.
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @replicas_and_partitions(%v: tensor<1x3xi32>) -> tensor<2x3xi32> {
    %z = mhlo.constant dense<0> : tensor<2x3xi32>
    %r = mhlo.replica_id : tensor<ui32>
    %c0 = mhlo.constant dense<0> : tensor<ui32>
    %p = mhlo.dynamic_update_slice %z, %v, %r, %c0 : (tensor<2x3xi32>, tensor<1x3xi32>, tensor<ui32>, tensor<ui32>) -> tensor<2x3xi32>
    // expected-remark @+1 {{left alone: its groups span replicas and every partition (a channel without use_global_device_ids)}}
    %s = "mhlo.all_reduce"(%p) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<i32>, %c: tensor<i32>):
      %t = mhlo.add %a, %c : tensor<i32>
      mhlo.return %t : tensor<i32>
    }) : (tensor<2x3xi32>) -> tensor<2x3xi32>
    return %s : tensor<2x3xi32>
  }
}

// -----

// Groups of 4 devices cannot fill 2 slots.
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @group_too_large(%v: tensor<1x3xi32>) -> tensor<2x3xi32> {
    %z = mhlo.constant dense<0> : tensor<2x3xi32>
    %r = mhlo.replica_id : tensor<ui32>
    %c0 = mhlo.constant dense<0> : tensor<ui32>
    %p = mhlo.dynamic_update_slice %z, %v, %r, %c0 : (tensor<2x3xi32>, tensor<1x3xi32>, tensor<ui32>, tensor<ui32>) -> tensor<2x3xi32>
    // expected-remark @+1 {{left alone: groups of 4 devices with pieces of 1 make 4, not the 2 written}}
    %s = "mhlo.all_reduce"(%p) <{replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}> ({
    ^bb0(%a: tensor<i32>, %c: tensor<i32>):
      %t = mhlo.add %a, %c : tensor<i32>
      mhlo.return %t : tensor<i32>
    }) : (tensor<2x3xi32>) -> tensor<2x3xi32>
    return %s : tensor<2x3xi32>
  }
}

// -----

// The index depends on an argument: it cannot be evaluated for each device.
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @index_from_an_argument(%v: tensor<1x3xi32>, %i: tensor<ui32>) -> tensor<2x3xi32> {
    %z = mhlo.constant dense<0> : tensor<2x3xi32>
    %c0 = mhlo.constant dense<0> : tensor<ui32>
    %p = mhlo.dynamic_update_slice %z, %v, %i, %c0 : (tensor<2x3xi32>, tensor<1x3xi32>, tensor<ui32>, tensor<ui32>) -> tensor<2x3xi32>
    // expected-remark @+1 {{left alone: an index is computed by a block argument, which this pass does not evaluate}}
    %s = "mhlo.all_reduce"(%p) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<i32>, %c: tensor<i32>):
      %t = mhlo.add %a, %c : tensor<i32>
      mhlo.return %t : tensor<i32>
    }) : (tensor<2x3xi32>) -> tensor<2x3xi32>
    return %s : tensor<2x3xi32>
  }
}

// -----

// A psum of a plain value is no unshard: left alone, no remark.
// CHECK-LABEL: func.func public @psum
// CHECK: "mhlo.all_reduce"
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @psum(%v: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %s = "mhlo.all_reduce"(%v) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %c: tensor<f32>):
      %t = mhlo.add %a, %c : tensor<f32>
      mhlo.return %t : tensor<f32>
    }) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %s : tensor<2x3xf32>
  }
}
