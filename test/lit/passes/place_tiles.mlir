// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-place-tiles)' | filecheck %s

// jit of an xmap over mesh axis x: the argument is only sliced by device
// index (jax's axis_index lowering, with dynamic_slice's wrap of a negative
// start): it enters as the device's tile, split over x.

// CHECK-LABEL: func.func public @main
// CHECK-SAME: (%[[A:.*]]: tensor<16x32xf32> {pxla.tile_dims = {{\[\[}}"x"], []]}) -> tensor<16x32xf32>
// CHECK-NOT: stablehlo.dynamic_slice
// CHECK: return %[[A]] : tensor<16x32xf32>
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  func.func public @main(%arg0: tensor<128x32xf32> {pxla.tile_dims = [[], []]}) -> tensor<16x32xf32> {
    %c1 = stablehlo.constant dense<1> : tensor<ui32>
    %c8 = stablehlo.constant dense<8> : tensor<ui32>
    %0 = stablehlo.partition_id : tensor<ui32>
    %1 = stablehlo.divide %0, %c1 : tensor<ui32>
    %2 = stablehlo.remainder %1, %c8 : tensor<ui32>
    %3 = stablehlo.convert %2 : (tensor<ui32>) -> tensor<i32>
    %c16 = stablehlo.constant dense<16> : tensor<i32>
    %4 = stablehlo.multiply %3, %c16 : tensor<i32>
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %5 = stablehlo.compare LT, %4, %c0, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %c128 = stablehlo.constant dense<128> : tensor<i32>
    %6 = stablehlo.add %4, %c128 : tensor<i32>
    %7 = stablehlo.select %5, %6, %4 : tensor<i1>, tensor<i32>
    %8 = stablehlo.dynamic_slice %arg0, %7, %c0, sizes = [16, 32] : (tensor<128x32xf32>, tensor<i32>, tensor<i32>) -> tensor<16x32xf32>
    return %8 : tensor<16x32xf32>
  }
}

// -----

// MHLO, a 2x4 mesh: dimension 0 by x (stride 4), dimension 1 by y, two alike
// slices; the second argument is sliced along a run of both axes (x, y:
// stride 1, size 8). A donated argument aliased to a whole result becomes a
// donor only. The third is only sliced along a dimension it had not split.

// CHECK-LABEL: func.func public @main
// CHECK-SAME: (%[[A:.*]]: tensor<4x3xf32> {jax.buffer_donor = true, pxla.tile_dims = {{\[\[}}"x"], ["y"]]}, %[[B:.*]]: tensor<2xf32> {pxla.tile_dims = {{\[\[}}"x", "y"]]}, %[[C:.*]]: tensor<2x3xf32> {pxla.tile_dims = {{\[\[}}"x"], ["y"]]})
// CHECK-SAME: -> (tensor<8x12xf32>, tensor<4x3xf32>, tensor<2xf32>, tensor<2x3xf32>)
// CHECK-NOT: mhlo.dynamic_slice
// CHECK: %[[S:.*]] = mhlo.add %[[A]], %[[A]] : tensor<4x3xf32>
// CHECK: return %{{.*}}, %[[S]], %[[B]], %[[C]]
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @main(%arg0: tensor<8x12xf32> {pxla.tile_dims = [[], []], tf.aliasing_output = 0 : i32}, %arg1: tensor<16xf32> {pxla.tile_dims = [[]]}, %arg2: tensor<2x12xf32> {pxla.tile_dims = [["x"], []]}) -> (tensor<8x12xf32>, tensor<4x3xf32>, tensor<2xf32>, tensor<2x3xf32>) {
    %pid = mhlo.partition_id : tensor<ui32>
    %c1 = mhlo.constant dense<1> : tensor<ui32>
    %c2 = mhlo.constant dense<2> : tensor<ui32>
    %c4 = mhlo.constant dense<4> : tensor<ui32>
    %c8 = mhlo.constant dense<8> : tensor<ui32>
    %i3 = mhlo.constant dense<3> : tensor<i32>
    %i4 = mhlo.constant dense<4> : tensor<i32>
    %i2 = mhlo.constant dense<2> : tensor<i32>
    %zero = mhlo.constant dense<0> : tensor<i32>
    %xd = mhlo.divide %pid, %c4 : tensor<ui32>
    %xr = mhlo.remainder %xd, %c2 : tensor<ui32>
    %xi = mhlo.convert %xr : (tensor<ui32>) -> tensor<i32>
    %xs = mhlo.multiply %xi, %i4 : tensor<i32>
    %yr = mhlo.remainder %pid, %c4 : tensor<ui32>
    %yi = mhlo.convert %yr : (tensor<ui32>) -> tensor<i32>
    %ys = mhlo.multiply %i3, %yi : tensor<i32>
    %t1 = "mhlo.dynamic_slice"(%arg0, %xs, %ys) <{slice_sizes = dense<[4, 3]> : tensor<2xi64>}> : (tensor<8x12xf32>, tensor<i32>, tensor<i32>) -> tensor<4x3xf32>
    %t2 = "mhlo.dynamic_slice"(%arg0, %xs, %ys) <{slice_sizes = dense<[4, 3]> : tensor<2xi64>}> : (tensor<8x12xf32>, tensor<i32>, tensor<i32>) -> tensor<4x3xf32>
    %s = mhlo.add %t1, %t2 : tensor<4x3xf32>
    %w = mhlo.constant dense<0.000000e+00> : tensor<8x12xf32>
    %br = mhlo.remainder %pid, %c8 : tensor<ui32>
    %bi = mhlo.convert %br : (tensor<ui32>) -> tensor<i32>
    %bs = mhlo.multiply %bi, %i2 : tensor<i32>
    %b = "mhlo.dynamic_slice"(%arg1, %bs) <{slice_sizes = dense<2> : tensor<1xi64>}> : (tensor<16xf32>, tensor<i32>) -> tensor<2xf32>
    %c = "mhlo.dynamic_slice"(%arg2, %zero, %ys) <{slice_sizes = dense<[2, 3]> : tensor<2xi64>}> : (tensor<2x12xf32>, tensor<i32>, tensor<i32>) -> tensor<2x3xf32>
    return %w, %s, %b, %c : tensor<8x12xf32>, tensor<4x3xf32>, tensor<2xf32>, tensor<2x3xf32>
  }
}

// -----

// No-ops: an argument also used whole; slices that differ; a start that is
// not a device index; a device index that is no mesh axis ((pid / 2) % 2 on
// x=8); a dimension split already (by x, sliced again by x); a slice of all
// of a dimension.

// CHECK-LABEL: func.func public @main
// CHECK-SAME: (%{{.*}}: tensor<16xf32> {pxla.tile_dims = {{\[\[}}]]}, %{{.*}}: tensor<16xf32> {pxla.tile_dims = {{\[\[}}]]}, %{{.*}}: tensor<16xf32> {pxla.tile_dims = {{\[\[}}]]}, %{{.*}}: tensor<16xf32> {pxla.tile_dims = {{\[\[}}]]}, %{{.*}}: tensor<16xf32> {pxla.tile_dims = {{\[\[}}"x"]]}, %{{.*}}: tensor<16xf32> {pxla.tile_dims = {{\[\[}}]]})
// CHECK-COUNT-7: mhlo.dynamic_slice
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  func.func public @main(%arg0: tensor<16xf32> {pxla.tile_dims = [[]]}, %arg1: tensor<16xf32> {pxla.tile_dims = [[]]}, %arg2: tensor<16xf32> {pxla.tile_dims = [[]]}, %arg3: tensor<16xf32> {pxla.tile_dims = [[]]}, %arg4: tensor<16xf32> {pxla.tile_dims = [["x"]]}, %arg5: tensor<16xf32> {pxla.tile_dims = [[]]}) -> (tensor<16xf32>, tensor<2xf32>, tensor<2xf32>, tensor<4xf32>, tensor<2xf32>, tensor<8xf32>, tensor<2xf32>, tensor<16xf32>) {
    %pid = mhlo.partition_id : tensor<ui32>
    %c2 = mhlo.constant dense<2> : tensor<ui32>
    %c8 = mhlo.constant dense<8> : tensor<ui32>
    %i2 = mhlo.constant dense<2> : tensor<i32>
    %i4 = mhlo.constant dense<4> : tensor<i32>
    %i3 = mhlo.constant dense<3> : tensor<i32>
    %zero = mhlo.constant dense<0> : tensor<i32>
    %r = mhlo.remainder %pid, %c8 : tensor<ui32>
    %i = mhlo.convert %r : (tensor<ui32>) -> tensor<i32>
    %s = mhlo.multiply %i, %i2 : tensor<i32>
    %t0 = "mhlo.dynamic_slice"(%arg0, %s) <{slice_sizes = dense<2> : tensor<1xi64>}> : (tensor<16xf32>, tensor<i32>) -> tensor<2xf32>
    %t1 = "mhlo.dynamic_slice"(%arg1, %s) <{slice_sizes = dense<2> : tensor<1xi64>}> : (tensor<16xf32>, tensor<i32>) -> tensor<2xf32>
    %t1b = "mhlo.dynamic_slice"(%arg1, %zero) <{slice_sizes = dense<2> : tensor<1xi64>}> : (tensor<16xf32>, tensor<i32>) -> tensor<2xf32>
    %t2 = "mhlo.dynamic_slice"(%arg2, %i3) <{slice_sizes = dense<4> : tensor<1xi64>}> : (tensor<16xf32>, tensor<i32>) -> tensor<4xf32>
    %d = mhlo.divide %pid, %c2 : tensor<ui32>
    %dr = mhlo.remainder %d, %c2 : tensor<ui32>
    %di = mhlo.convert %dr : (tensor<ui32>) -> tensor<i32>
    %ds = mhlo.multiply %di, %i4 : tensor<i32>
    %t3 = "mhlo.dynamic_slice"(%arg3, %ds) <{slice_sizes = dense<8> : tensor<1xi64>}> : (tensor<16xf32>, tensor<i32>) -> tensor<8xf32>
    %t4 = "mhlo.dynamic_slice"(%arg4, %s) <{slice_sizes = dense<2> : tensor<1xi64>}> : (tensor<16xf32>, tensor<i32>) -> tensor<2xf32>
    %t5 = "mhlo.dynamic_slice"(%arg5, %zero) <{slice_sizes = dense<16> : tensor<1xi64>}> : (tensor<16xf32>, tensor<i32>) -> tensor<16xf32>
    return %arg0, %t0, %t1, %t2, %t4, %t3, %t1b, %t5 : tensor<16xf32>, tensor<2xf32>, tensor<2xf32>, tensor<4xf32>, tensor<2xf32>, tensor<8xf32>, tensor<2xf32>, tensor<16xf32>
  }
}
