// RUN: pxla-mlir run %s --load-pass-plugin=%S/../../../examples/plugins/unshard_as_all_gather.py --compare-pipeline 'builtin.module(unshard-as-all-gather)' 2> %t.err | filecheck %s
// RUN: filecheck %s --check-prefix=RAN --input-file %t.err

// The numerical differential test of the rewrite: a nested pmap's final module (pmap over i=2 of a pmap over
// j=4 with unshard="all-reduce", the outer body reversing the gathered value), run on 8 CPU devices before
// and after the plugin, on the same inputs. Integers: the results must agree exactly.

// RAN: pipeline builtin.module(unshard-as-all-gather,pxla-verify-handoff)
// CHECK: 0       int32[2,4,3]              0              0  agree
// CHECK: all 1 results agree
module @pmap_outer attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "i=2,j=4"} {
  func.func public @main(%arg0: tensor<1x1x3xi32> {pxla.tile_dims = [["i"], ["j"], []]}) -> (tensor<1x4x3xi32> {pxla.tile_dims = [["i"], [], []]}) {
    %0 = mhlo.constant dense<1> : tensor<3xi32>
    %1 = mhlo.constant dense<2> : tensor<3xi32>
    %2 = mhlo.constant dense<0> : tensor<i32>
    %3 = mhlo.constant dense<4> : tensor<ui32>
    %4 = mhlo.constant dense<0> : tensor<4x3xi32>
    %5 = mhlo.reshape %arg0 : (tensor<1x1x3xi32>) -> tensor<3xi32>
    %6 = mhlo.multiply %5, %1 : tensor<3xi32>
    %7 = mhlo.add %6, %0 : tensor<3xi32>
    %8 = mhlo.reshape %7 : (tensor<3xi32>) -> tensor<1x3xi32>
    %9 = mhlo.replica_id : tensor<ui32>
    %10 = mhlo.remainder %9, %3 : tensor<ui32>
    %11 = mhlo.convert %10 : (tensor<ui32>) -> tensor<i32>
    %12 = mhlo.dynamic_update_slice %4, %8, %11, %2 : (tensor<4x3xi32>, tensor<1x3xi32>, tensor<i32>, tensor<i32>) -> tensor<4x3xi32>
    %13 = "mhlo.all_reduce"(%12) <{replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> ({
    ^bb0(%arg1: tensor<i32>, %arg2: tensor<i32>):
      %16 = mhlo.add %arg1, %arg2 : tensor<i32>
      mhlo.return %16 : tensor<i32>
    }) : (tensor<4x3xi32>) -> tensor<4x3xi32>
    %14 = "mhlo.reverse"(%13) <{dimensions = dense<0> : tensor<1xi64>}> : (tensor<4x3xi32>) -> tensor<4x3xi32>
    %15 = mhlo.reshape %14 : (tensor<4x3xi32>) -> tensor<1x4x3xi32>
    return %15 : tensor<1x4x3xi32>
  }
}
