// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-elide-trivial-collectives)' | filecheck %s

// A pmap of size 1 (one replica, one partition): psum, pmax, all_gather,
// all_to_all and a ppermute to itself are each their operand, as jax's
// program is once XLA has simplified it. A psum_scatter's reduce_scatter
// stays (XLA:CPU adds it to +0.0 in jax's program too).

// CHECK-LABEL: func.func public @size_one
// CHECK-SAME: (%[[X:.*]]: tensor<4x2xf32>, %[[B:.*]]: tensor<1x4x2xf32>)
// CHECK-NOT: mhlo.all_reduce
// CHECK-NOT: mhlo.all_gather
// CHECK: %[[S:.*]] = "mhlo.reduce_scatter"(%[[X]])
// CHECK-NOT: mhlo.all_to_all
// CHECK-NOT: mhlo.collective_permute
// CHECK: return %[[X]], %[[S]], %[[B]], %[[X]], %[[X]], %[[X]]
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @size_one(%x: tensor<4x2xf32>, %b: tensor<1x4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<1x4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>) {
    %0 = "mhlo.all_reduce"(%x) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<0> : tensor<1x1xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = mhlo.add %l, %r : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %1 = "mhlo.all_reduce"(%0) <{channel_handle = #mhlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<0> : tensor<1x1xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = mhlo.maximum %l, %r : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %2 = "mhlo.all_gather"(%b) <{all_gather_dim = 0 : i64, channel_handle = #mhlo.channel_handle<handle = 3, type = 1>, replica_groups = dense<0> : tensor<1x1xi64>, use_global_device_ids}> : (tensor<1x4x2xf32>) -> tensor<1x4x2xf32>
    %3 = "mhlo.reduce_scatter"(%x) <{channel_handle = #mhlo.channel_handle<handle = 4, type = 1>, replica_groups = dense<0> : tensor<1x1xi64>, scatter_dimension = 0 : i64, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = mhlo.add %l, %r : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %4 = "mhlo.all_to_all"(%x) <{channel_handle = #mhlo.channel_handle<handle = 5, type = 1>, concat_dimension = 1 : i64, replica_groups = dense<0> : tensor<1x1xi64>, split_count = 1 : i64, split_dimension = 0 : i64}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %5 = "mhlo.collective_permute"(%x) <{channel_handle = #mhlo.channel_handle<handle = 6, type = 1>, source_target_pairs = dense<0> : tensor<1x2xi64>}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
    return %1, %3, %2, %4, %5, %x : tensor<4x2xf32>, tensor<4x2xf32>, tensor<1x4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>
  }
}

// -----

// A size-1 inner axis of a 2 x 1 nested pmap, in replica mode (groups of
// replicas, no channel): the sum over 'j' goes, the one over 'i' stays. A
// variadic all_reduce gives back each operand. Groups padded with -1 still
// count as single devices.

// CHECK-LABEL: func.func public @inner_axis
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>, %[[N:.*]]: tensor<f32>)
// CHECK: %[[I:.*]] = "mhlo.all_reduce"(%[[X]])
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1]]>
// CHECK-NOT: mhlo.all_reduce
// CHECK: return %[[I]], %[[X]], %[[N]], %[[X]]
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @inner_axis(%x: tensor<3xf32>, %n: tensor<f32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32>) {
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = mhlo.add %l, %r : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    %1:2 = "mhlo.all_reduce"(%x, %n) <{replica_groups = dense<[[0], [1]]> : tensor<2x1xi64>}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = mhlo.add %l, %r : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<3xf32>, tensor<f32>) -> (tensor<3xf32>, tensor<f32>)
    %2 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, -1], [1, -1]]> : tensor<2x2xi64>}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = mhlo.minimum %l, %r : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    return %0, %1#0, %1#1, %2 : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32>
  }
}

// -----

// Partition mode, 4 partitions, flattened ids: an all_gather over single
// devices goes, one over pairs stays. A cross-replica all_reduce of the one
// replica is a group of one device in each partition.

// CHECK-LABEL: func.func public @partitions
// CHECK-SAME: (%[[X:.*]]: tensor<1x3xf32>)
// CHECK: %[[G:.*]] = "mhlo.all_gather"(%[[X]])
// CHECK-SAME{LITERAL}: replica_groups = dense<[[0, 1], [2, 3]]>
// CHECK-NOT: mhlo.all_gather
// CHECK-NOT: mhlo.all_reduce
// CHECK: return %[[X]], %[[G]], %[[X]]
module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @partitions(%x: tensor<1x3xf32>) -> (tensor<1x3xf32>, tensor<2x3xf32>, tensor<1x3xf32>) {
    %0 = "mhlo.all_gather"(%x) <{all_gather_dim = 0 : i64, channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0], [1], [2], [3]]> : tensor<4x1xi64>, use_global_device_ids}> : (tensor<1x3xf32>) -> tensor<1x3xf32>
    %1 = "mhlo.all_gather"(%x) <{all_gather_dim = 0 : i64, channel_handle = #mhlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> : (tensor<1x3xf32>) -> tensor<2x3xf32>
    %2 = "mhlo.all_reduce"(%x) <{replica_groups = dense<0> : tensor<1x1xi64>}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = mhlo.add %l, %r : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<1x3xf32>) -> tensor<1x3xf32>
    return %0, %1, %2 : tensor<1x3xf32>, tensor<2x3xf32>, tensor<1x3xf32>
  }
}

// -----

// collective_permute: every device to itself goes; a shift, and self pairs
// that leave device 1 out (it would receive zeros), stay. An all_reduce over
// one group of both partitions (cross-replica-and-partition: a channel
// without global ids) stays too.

// CHECK-LABEL: func.func public @permutes
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>)
// CHECK: %[[S:.*]] = "mhlo.collective_permute"(%[[X]])
// CHECK-SAME{LITERAL}: source_target_pairs = dense<[[0, 1], [1, 0]]>
// CHECK: %[[P:.*]] = "mhlo.collective_permute"(%[[X]])
// CHECK-SAME: source_target_pairs = dense<0> : tensor<1x2xi64>
// CHECK: %[[R:.*]] = "mhlo.all_reduce"(%[[X]])
// CHECK: return %[[X]], %[[S]], %[[P]], %[[R]]
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @permutes(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
    %0 = "mhlo.collective_permute"(%x) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 0], [1, 1]]> : tensor<2x2xi64>}> : (tensor<3xf32>) -> tensor<3xf32>
    %1 = "mhlo.collective_permute"(%x) <{channel_handle = #mhlo.channel_handle<handle = 2, type = 1>, source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<3xf32>) -> tensor<3xf32>
    %2 = "mhlo.collective_permute"(%x) <{channel_handle = #mhlo.channel_handle<handle = 3, type = 1>, source_target_pairs = dense<0> : tensor<1x2xi64>}> : (tensor<3xf32>) -> tensor<3xf32>
    %3 = "mhlo.all_reduce"(%x) <{channel_handle = #mhlo.channel_handle<handle = 4, type = 1>, replica_groups = dense<0> : tensor<1x1xi64>}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = mhlo.add %l, %r : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    return %0, %1, %2, %3 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  }
}

// -----

// No device counts on the module: one replica and one partition, as XLA
// assumes. A collective_broadcast of one device is its operand.

// CHECK-LABEL: func.func public @no_counts
// CHECK-SAME: (%[[X:.*]]: tensor<3xf32>)
// CHECK-NOT: mhlo.collective_broadcast
// CHECK: return %[[X]]
module {
  func.func public @no_counts(%x: tensor<3xf32>) -> tensor<3xf32> {
    %0 = "mhlo.collective_broadcast"(%x) <{replica_groups = dense<0> : tensor<1x1xi64>}> : (tensor<3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
