// An xmap on a 2x4 mesh ('m' -> x, 'n' -> y, tiles 2x2) as import emits its
// per-device tile body, through the replica and manual lowerings; the global
// view (Inputs/xmap_global_view.mlir) through the vectorize lowering.

// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-xmap-pipeline)' | filecheck %s --check-prefix=REPLICA
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-xmap-pipeline{lowering=manual})' | filecheck %s --check-prefix=MANUAL-SDY
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-xmap-pipeline{lowering=manual sharding-dialect=gspmd})' | filecheck %s --check-prefix=MANUAL
// RUN: pxla-opt %S/../Inputs/xmap_global_view.mlir --pass-pipeline='builtin.module(pxla-xmap-pipeline{lowering=vectorize})' | filecheck %s --check-prefix=VECTORIZE-SDY
// RUN: pxla-opt %S/../Inputs/xmap_global_view.mlir --pass-pipeline='builtin.module(pxla-xmap-pipeline{lowering=vectorize sharding-dialect=gspmd})' | filecheck %s --check-prefix=VECTORIZE
// The Shardy forms hold no GSPMD construct, the GSPMD forms and the replica form no sdy.
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-xmap-pipeline{lowering=manual})' | filecheck %s --check-prefix=NO-GSPMD
// RUN: pxla-opt %S/../Inputs/xmap_global_view.mlir --pass-pipeline='builtin.module(pxla-xmap-pipeline{lowering=vectorize})' | filecheck %s --check-prefix=NO-GSPMD
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-xmap-pipeline{lowering=manual sharding-dialect=gspmd})' | filecheck %s --check-prefix=NO-SDY
// RUN: pxla-opt %S/../Inputs/xmap_global_view.mlir --pass-pipeline='builtin.module(pxla-xmap-pipeline{lowering=vectorize sharding-dialect=gspmd})' | filecheck %s --check-prefix=NO-SDY
// RUN: pxla-opt %s --pass-pipeline='builtin.module(pxla-xmap-pipeline{sharding-dialect=sdy})' | filecheck %s --check-prefixes=NO-SDY,NO-GSPMD
// NO-GSPMD-NOT: {{mhlo.sharding|@Sharding|@SPMD}}
// NO-SDY-NOT: sdy

// REPLICA: mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32
// REPLICA: func.func public @main(%{{.*}}: tensor<2x2x3xf32> {pxla.tile_dims = {{\[\[}}"x"], ["y"], []]}) -> (tensor<2x2x3xf32> {pxla.tile_dims = {{\[\[}}"x"], ["y"], []]})
// REPLICA: "mhlo.all_reduce"({{.*}}) <{replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}>
// REPLICA: mhlo.replica_id

// MANUAL: func.func public @main(%{{.*}}: tensor<4x8x3xf32> {mhlo.sharding = "{devices=[2,4,1]<=[8]}"}) -> (tensor<4x8x3xf32> {mhlo.sharding = "{devices=[2,4,1]<=[8]}"})
// MANUAL: @SPMDFullToShardShape({{.*}}) {mhlo.sharding = "{manual}"} : (tensor<4x8x3xf32>) -> tensor<2x2x3xf32>
// MANUAL: @SPMDShardToFullShape({{.*}}) {{.*}} : (tensor<2x2x3xf32>) -> tensor<4x8x3xf32>
// MANUAL: func.func private @main_per_device
// MANUAL: mhlo.partition_id

// MANUAL-SDY: sdy.mesh @mesh = <["x"=2, "y"=4]>
// MANUAL-SDY-NEXT: func.func public @main(%[[A:.*]]: tensor<4x8x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>}) -> (tensor<4x8x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>})
// MANUAL-SDY-NEXT: sdy.manual_computation(%[[A]]) in_shardings=[<@mesh, [{"x"}, {"y"}, {}]>] out_shardings=[<@mesh, [{"x"}, {"y"}, {}]>] manual_axes={"x", "y"} (%[[T:.*]]: tensor<2x2x3xf32>) {
// MANUAL-SDY-NEXT: func.call @main_per_device(%[[T]])
// MANUAL-SDY: func.func private @main_per_device
// MANUAL-SDY: mhlo.partition_id

// VECTORIZE-SDY: sdy.mesh @mesh = <["x"=2, "y"=4]>
// VECTORIZE-SDY-NEXT: func.func public @main(%{{.*}}: tensor<4x8x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>}) -> (tensor<4x8x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}, {}]>})
// VECTORIZE-SDY-NOT: manual_computation

// VECTORIZE: func.func public @main(%{{.*}}: tensor<4x8x3xf32> {mhlo.sharding = "{devices=[2,4,1]<=[8]}"}) -> (tensor<4x8x3xf32> {mhlo.sharding = "{devices=[2,4,1]<=[8]}"})
// VECTORIZE-NOT: pxla.dims
// VECTORIZE-NOT: all_reduce

module @xmap__lambda attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @main(%arg0: tensor<2x2x3xf32> {pxla.tile_dims = [["x"], ["y"], []]}) -> (tensor<2x2x3xf32> {pxla.tile_dims = [["x"], ["y"], []]}) {
    %0 = mhlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = mhlo.reduce(%arg0 init: %0) applies mhlo.add across dimensions = [1] : (tensor<2x2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    %2 = "mhlo.all_reduce"(%1) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %25 = mhlo.add %arg1, %arg2 : tensor<f32>
      mhlo.return %25 : tensor<f32>
    }) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %3 = "mhlo.iota"() <{iota_dimension = 0 : i64}> : () -> tensor<2xi32>
    %4 = mhlo.constant dense<1> : tensor<i32>
    %5 = "mhlo.broadcast_in_dim"(%4) <{broadcast_dimensions = dense<> : tensor<0xi64>}> : (tensor<i32>) -> tensor<2xi32>
    %6 = mhlo.multiply %3, %5 : tensor<2xi32>
    %7 = mhlo.constant dense<0> : tensor<i32>
    %8 = "mhlo.broadcast_in_dim"(%7) <{broadcast_dimensions = dense<> : tensor<0xi64>}> : (tensor<i32>) -> tensor<2xi32>
    %9 = mhlo.add %8, %6 : tensor<2xi32>
    %10 = mhlo.constant dense<4> : tensor<ui32>
    %11 = mhlo.constant dense<2> : tensor<ui32>
    %12 = mhlo.partition_id : tensor<ui32>
    %13 = mhlo.divide %12, %10 : tensor<ui32>
    %14 = mhlo.remainder %13, %11 : tensor<ui32>
    %15 = mhlo.convert %14 : (tensor<ui32>) -> tensor<i32>
    %16 = mhlo.constant dense<2> : tensor<i32>
    %17 = mhlo.multiply %15, %16 : tensor<i32>
    %18 = "mhlo.broadcast_in_dim"(%17) <{broadcast_dimensions = dense<> : tensor<0xi64>}> : (tensor<i32>) -> tensor<2xi32>
    %19 = mhlo.add %9, %18 : tensor<2xi32>
    %20 = mhlo.convert %19 : (tensor<2xi32>) -> tensor<2xf32>
    %21 = "mhlo.broadcast_in_dim"(%20) <{broadcast_dimensions = dense<0> : tensor<1xi64>}> : (tensor<2xf32>) -> tensor<2x1xf32>
    %22 = "mhlo.broadcast_in_dim"(%21) <{broadcast_dimensions = dense<[0, 1]> : tensor<2xi64>}> : (tensor<2x1xf32>) -> tensor<2x3xf32>
    %23 = mhlo.add %2, %22 : tensor<2x3xf32>
    %24 = "mhlo.broadcast_in_dim"(%23) <{broadcast_dimensions = dense<[0, 2]> : tensor<2xi64>}> : (tensor<2x3xf32>) -> tensor<2x2x3xf32>
    return %24 : tensor<2x2x3xf32>
  }
}
