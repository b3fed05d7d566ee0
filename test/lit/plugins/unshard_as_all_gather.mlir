// RUN: pxla-opt %s --split-input-file --load-pass-plugin=%S/../../../examples/plugins/unshard_as_all_gather.py -p 'builtin.module(unshard-as-all-gather)' | filecheck %s
// RUN: pxla-opt %s --split-input-file --load-pass-plugin=%S/../../../examples/plugins/unshard_as_all_gather.py -p 'builtin.module(unshard-as-all-gather{float-sums=gather})' | filecheck %s --check-prefix=GATHER

// pxla's own all-reduce unshard in replica mode (8 replicas, axis j of i=2, j=4): floats summed as their
// bits. The bitcasts stay; the zeros, the index arithmetic and the dynamic_update_slice go.

// CHECK-LABEL: func.func public @replica_mode
// CHECK-SAME: (%[[V:.*]]: tensor<3xf32>)
// CHECK-NEXT: %[[B:.*]] = mhlo.bitcast_convert %[[V]] : (tensor<3xf32>) -> tensor<3xi32>
// CHECK-NEXT: %[[U:.*]] = mhlo.reshape %[[B]] : (tensor<3xi32>) -> tensor<1x3xi32>
// CHECK-NEXT: %[[G:.*]] = "mhlo.all_gather"(%[[U]]) <{all_gather_dim = 0 : i64, replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> : (tensor<1x3xi32>) -> tensor<4x3xi32>
// CHECK-NEXT: %[[Y:.*]] = mhlo.bitcast_convert %[[G]] : (tensor<4x3xi32>) -> tensor<4x3xf32>
// CHECK-NEXT: return %[[Y]]
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32} {
  func.func public @replica_mode(%v: tensor<3xf32>) -> tensor<4x3xf32> {
    %c4 = mhlo.constant dense<4> : tensor<ui32>
    %c0 = mhlo.constant dense<0> : tensor<i32>
    %z = mhlo.constant dense<0> : tensor<4x3xi32>
    %b = mhlo.bitcast_convert %v : (tensor<3xf32>) -> tensor<3xi32>
    %u = mhlo.reshape %b : (tensor<3xi32>) -> tensor<1x3xi32>
    %r = mhlo.replica_id : tensor<ui32>
    %m = mhlo.remainder %r, %c4 : tensor<ui32>
    %i = mhlo.convert %m : (tensor<ui32>) -> tensor<i32>
    %p = mhlo.dynamic_update_slice %z, %u, %i, %c0 : (tensor<4x3xi32>, tensor<1x3xi32>, tensor<i32>, tensor<i32>) -> tensor<4x3xi32>
    %s = "mhlo.all_reduce"(%p) <{replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> ({
    ^bb0(%a: tensor<i32>, %c: tensor<i32>):
      %t = mhlo.add %a, %c : tensor<i32>
      mhlo.return %t : tensor<i32>
    }) : (tensor<4x3xi32>) -> tensor<4x3xi32>
    %y = mhlo.bitcast_convert %s : (tensor<4x3xi32>) -> tensor<4x3xf32>
    return %y : tensor<4x3xf32>
  }
}

// -----

// Partition mode, out_axis 1 of axis j (size 4, stride 2): flattened ids, the channel and
// use_global_device_ids copied; the index is (partition_id / 2) % 4.

// CHECK-LABEL: func.func public @partition_mode_out_axis_1
// CHECK-SAME: (%[[V:.*]]: tensor<3x5xi32>)
// CHECK-NEXT: %[[U:.*]] = mhlo.reshape %[[V]] : (tensor<3x5xi32>) -> tensor<3x1x5xi32>
// CHECK-NEXT: %[[G:.*]] = "mhlo.all_gather"(%[[U]]) <{all_gather_dim = 1 : i64, channel_handle = #mhlo.channel_handle<handle = 3, type = 1>, replica_groups = dense<{{\[\[}}0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>, use_global_device_ids}> : (tensor<3x1x5xi32>) -> tensor<3x4x5xi32>
// CHECK-NEXT: return %[[G]]
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @partition_mode_out_axis_1(%v: tensor<3x5xi32>) -> tensor<3x4x5xi32> {
    %z = mhlo.constant dense<0> : tensor<3x4x5xi32>
    %u = mhlo.reshape %v : (tensor<3x5xi32>) -> tensor<3x1x5xi32>
    %pid = mhlo.partition_id : tensor<ui32>
    %c2 = mhlo.constant dense<2> : tensor<ui32>
    %q = mhlo.divide %pid, %c2 : tensor<ui32>
    %c4 = mhlo.constant dense<4> : tensor<ui32>
    %m = mhlo.remainder %q, %c4 : tensor<ui32>
    %i = mhlo.convert %m : (tensor<ui32>) -> tensor<i32>
    %c0 = mhlo.constant dense<0> : tensor<i32>
    %p = mhlo.dynamic_update_slice %z, %u, %c0, %i, %c0 : (tensor<3x4x5xi32>, tensor<3x1x5xi32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<3x4x5xi32>
    %s = "mhlo.all_reduce"(%p) <{channel_handle = #mhlo.channel_handle<handle = 3, type = 1>, replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<i32>, %c: tensor<i32>):
      %t = mhlo.add %c, %a : tensor<i32>
      mhlo.return %t : tensor<i32>
    }) : (tensor<3x4x5xi32>) -> tensor<3x4x5xi32>
    return %s : tensor<3x4x5xi32>
  }
}

// -----

// StableHLO, booleans summed with `or`, pieces of 2 rows (the index is 2 * replica_id).

// CHECK-LABEL: func.func public @stablehlo_bools
// CHECK-SAME: (%[[V:.*]]: tensor<2x3xi1>)
// CHECK-NEXT: %[[G:.*]] = "stablehlo.all_gather"(%[[V]]) <{all_gather_dim = 0 : i64, replica_groups = dense<{{\[\[}}0, 1]]> : tensor<1x2xi64>}> : (tensor<2x3xi1>) -> tensor<4x3xi1>
// CHECK-NEXT: return %[[G]]
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @stablehlo_bools(%v: tensor<2x3xi1>) -> tensor<4x3xi1> {
    %z = stablehlo.constant dense<false> : tensor<4x3xi1>
    %r = stablehlo.replica_id : tensor<ui32>
    %c2 = stablehlo.constant dense<2> : tensor<ui32>
    %m = stablehlo.multiply %r, %c2 : tensor<ui32>
    %i = stablehlo.convert %m : (tensor<ui32>) -> tensor<i32>
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %p = stablehlo.dynamic_update_slice %z, %v, %i, %c0 : (tensor<4x3xi1>, tensor<2x3xi1>, tensor<i32>, tensor<i32>) -> tensor<4x3xi1>
    %s = "stablehlo.all_reduce"(%p) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<i1>, %c: tensor<i1>):
      %t = stablehlo.or %a, %c : tensor<i1>
      stablehlo.return %t : tensor<i1>
    }) : (tensor<4x3xi1>) -> tensor<4x3xi1>
    return %s : tensor<4x3xi1>
  }
}

// -----

// 2022's spelling: a float cross-replica-sum of the padded piece. By default every zero becomes +0.0
// after the gather, as the sum gives it (-0.0 + 0.0 = +0.0); float-sums=gather keeps each device's bits.

// CHECK-LABEL: func.func public @float_sum_2022
// CHECK-SAME: (%[[V:.*]]: tensor<3xf32>)
// CHECK-NEXT: %[[U:.*]] = mhlo.reshape %[[V]] : (tensor<3xf32>) -> tensor<1x3xf32>
// CHECK-NEXT: %[[G:.*]] = "mhlo.all_gather"(%[[U]]) <{all_gather_dim = 0 : i64, replica_groups = dense<{{\[\[}}0, 1], [2, 3]]> : tensor<2x2xi64>}> : (tensor<1x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[Z:.*]] = mhlo.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK-NEXT: %[[E:.*]] = mhlo.compare EQ, %[[G]], %[[Z]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[Y:.*]] = mhlo.select %[[E]], %[[Z]], %[[G]] : tensor<2x3xi1>, tensor<2x3xf32>
// CHECK-NEXT: return %[[Y]]

// GATHER-LABEL: func.func public @float_sum_2022
// GATHER: %[[G:.*]] = "mhlo.all_gather"
// GATHER-NEXT: return %[[G]]
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @float_sum_2022(%v: tensor<3xf32>) -> tensor<2x3xf32> {
    %z = mhlo.constant dense<0.000000e+00> : tensor<2x3xf32>
    %u = mhlo.reshape %v : (tensor<3xf32>) -> tensor<1x3xf32>
    %r = mhlo.replica_id : tensor<ui32>
    %c2 = mhlo.constant dense<2> : tensor<ui32>
    %m = mhlo.remainder %r, %c2 : tensor<ui32>
    %c0 = mhlo.constant dense<0> : tensor<ui32>
    %p = mhlo.dynamic_update_slice %z, %u, %m, %c0 : (tensor<2x3xf32>, tensor<1x3xf32>, tensor<ui32>, tensor<ui32>) -> tensor<2x3xf32>
    %s = "mhlo.cross-replica-sum"(%p) <{replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>}> : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %s : tensor<2x3xf32>
  }
}
