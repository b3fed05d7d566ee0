// golden_numbers.mlir with the mean added instead of subtracted: result 0 differs.
module @pmap_centre attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "i=8"} {
  func.func public @main(%arg0: tensor<1x4xf32> {pxla.tile_dims = [["i"], []]}) -> (tensor<1x4xf32> {pxla.tile_dims = [["i"], []]}, tensor<4xf32> {pxla.tile_dims = [[]]}) {
    %0 = mhlo.constant dense<8.000000e+00> : tensor<4xf32>
    %1 = mhlo.reshape %arg0 : (tensor<1x4xf32>) -> tensor<4xf32>
    %2 = "mhlo.all_reduce"(%1) <{replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %7 = mhlo.add %arg1, %arg2 : tensor<f32>
      mhlo.return %7 : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %3 = mhlo.divide %2, %0 : tensor<4xf32>
    %4 = mhlo.add %1, %3 : tensor<4xf32>
    %5 = "mhlo.all_reduce"(%1) <{replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %7 = mhlo.add %arg1, %arg2 : tensor<f32>
      mhlo.return %7 : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %6 = mhlo.reshape %4 : (tensor<4xf32>) -> tensor<1x4xf32>
    return %6, %5 : tensor<1x4xf32>, tensor<4xf32>
  }
}
