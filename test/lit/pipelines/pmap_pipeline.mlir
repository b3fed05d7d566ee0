// The pxla form of pmap(i=2) over pmap(j=4, in_axes=1, out_axes=1) with a
// psum over j and axis_index(i), as import emits it, through the pmap
// pipeline in both modes and with both unshard strategies.

// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-pmap-pipeline)' | filecheck %s --check-prefixes=CHECK,REPLICA,GATHER
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-pmap-pipeline{unshard=all-reduce})' | filecheck %s --check-prefixes=CHECK,REPLICA,REDUCE
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-pmap-pipeline{mode=partition})' | filecheck %s --check-prefixes=CHECK,PARTITION,SDY,GATHER
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-pmap-pipeline{mode=partition unshard=all-reduce})' | filecheck %s --check-prefixes=CHECK,PARTITION,SDY,REDUCE
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-pmap-pipeline{mode=partition sharding-dialect=gspmd})' | filecheck %s --check-prefixes=CHECK,PARTITION,GSPMD,GATHER
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-pmap-pipeline{sharding-dialect=gspmd})' | filecheck %s --check-prefixes=CHECK,REPLICA,GATHER
// Each form holds no construct of the other (the replica form neither).
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-pmap-pipeline{mode=partition})' | filecheck %s --check-prefix=NO-GSPMD
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-pmap-pipeline{mode=partition sharding-dialect=gspmd})' | filecheck %s --check-prefix=NO-SDY
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-pmap-pipeline)' | filecheck %s --check-prefixes=NO-SDY,NO-GSPMD
// NO-GSPMD-NOT: {{mhlo.sharding|@Sharding|@SPMD}}
// NO-SDY-NOT: sdy

// REPLICA-LABEL: module @pmap_outer attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32
// The per-device @main keeps pxla.tile_dims: the record of the global layout.
// REPLICA: func.func public @main(%{{.*}}: tensor<1x3x4xf32> {pxla.tile_dims = {{\[\[}}"i"], [], []]}) -> (tensor<1x3x4xf32> {pxla.tile_dims = {{\[\[}}"i"], [], []]})

// Partition mode: the per-device program is one manual region, in Shardy's
// form (the default) or GSPMD's.
// PARTITION-LABEL: module @pmap_outer attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32
// SDY-NEXT: sdy.mesh @mesh = <["i"=2, "_pxla_rep"=4]>
// SDY-NEXT: func.func public @main(%[[X:.*]]: tensor<2x3x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}, {}, {}]>}) -> (tensor<2x3x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"i"}, {}, {}]>})
// SDY-NEXT: sdy.manual_computation(%[[X]]) in_shardings=[<@mesh, [{"i"}, {}, {}]>] out_shardings=[<@mesh, [{"i"}, {}, {}]>] manual_axes={"i", "_pxla_rep"} (%[[T:.*]]: tensor<1x3x4xf32>) {
// SDY-NEXT: func.call @main_per_device(%[[T]])
// SDY-NEXT: sdy.return
// GSPMD: func.func public @main(%{{.*}}: tensor<2x3x4xf32> {mhlo.sharding = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"}) -> (tensor<2x3x4xf32> {mhlo.sharding = "{devices=[2,1,1,4]<=[8] last_tile_dim_replicate}"})
// GSPMD: @SPMDFullToShardShape({{.*}}) {mhlo.sharding = "{manual}"} : (tensor<2x3x4xf32>) -> tensor<1x3x4xf32>
// GSPMD: call @main_per_device
// GSPMD: @SPMDShardToFullShape({{.*}}) {{.*}} : (tensor<1x3x4xf32>) -> tensor<2x3x4xf32>
// PARTITION: func.func private @main_per_device

// Shard: this device's column j = id % 4 of the 3x4 block.
// REPLICA: mhlo.replica_id
// PARTITION: mhlo.partition_id
// CHECK: "mhlo.dynamic_slice"({{.*}}) <{slice_sizes = dense<[3, 1]> : tensor<2xi64>}>
// psum over j: the 4 devices sharing an i.
// CHECK: "mhlo.all_reduce"({{.*}}replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// Unshard along out_axis 1 over the same groups.
// GATHER: "mhlo.all_gather"({{.*}}) <{all_gather_dim = 1 : i64, {{.*}}replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>{{.*}}}> : (tensor<3x1xf32>) -> tensor<3x4xf32>
// REDUCE: mhlo.dynamic_update_slice {{.*}} : (tensor<3x4xi32>, tensor<3x1xi32>, tensor<i32>, tensor<i32>) -> tensor<3x4xi32>
// REDUCE: "mhlo.all_reduce"({{.*}}replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
// REDUCE: mhlo.bitcast_convert {{.*}} : (tensor<3x4xi32>) -> tensor<3x4xf32>
// CHECK-NOT: pxla.shard
// CHECK-NOT: pxla.unshard
// REPLICA-NOT: partition_id
// REPLICA-NOT: channel_handle

module @pmap_outer attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=2,_pxla_rep=4"} {
  func.func public @main(%arg0: tensor<1x3x4xf32> {pxla.tile_dims = [["i"], [], []]}) -> (tensor<1x3x4xf32> {pxla.tile_dims = [["i"], [], []]}) {
    %0 = mhlo.reshape %arg0 : (tensor<1x3x4xf32>) -> tensor<3x4xf32>
    %1 = mhlo.custom_call @pxla.shard(%0) {api_version = 2 : i32, backend_config = "", pxla.axis = 1 : i64, pxla.axis_name = "j", pxla.axis_size = 4 : i64, pxla.stride = 1 : i64} : (tensor<3x4xf32>) -> tensor<3xf32>
    %2 = "mhlo.all_reduce"(%1) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %14 = mhlo.add %arg1, %arg2 : tensor<f32>
      mhlo.return %14 : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    %3 = mhlo.constant dense<4> : tensor<ui32>
    %4 = mhlo.constant dense<2> : tensor<ui32>
    %5 = mhlo.partition_id : tensor<ui32>
    %6 = mhlo.divide %5, %3 : tensor<ui32>
    %7 = mhlo.remainder %6, %4 : tensor<ui32>
    %8 = mhlo.convert %7 : (tensor<ui32>) -> tensor<i32>
    %9 = mhlo.convert %8 : (tensor<i32>) -> tensor<f32>
    %10 = "mhlo.broadcast_in_dim"(%9) <{broadcast_dimensions = dense<> : tensor<0xi64>}> : (tensor<f32>) -> tensor<3xf32>
    %11 = mhlo.add %2, %10 : tensor<3xf32>
    %12 = mhlo.custom_call @pxla.unshard(%11) {api_version = 2 : i32, backend_config = "", pxla.axis = 1 : i64, pxla.axis_name = "j", pxla.axis_size = 4 : i64, pxla.stride = 1 : i64} : (tensor<3xf32>) -> tensor<3x4xf32>
    %13 = "mhlo.broadcast_in_dim"(%12) <{broadcast_dimensions = dense<[1, 2]> : tensor<2xi64>}> : (tensor<3x4xf32>) -> tensor<1x3x4xf32>
    return %13 : tensor<1x3x4xf32>
  }
}
