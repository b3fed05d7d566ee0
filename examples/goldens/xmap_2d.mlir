module @xmap_normalise attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @main(%arg0: tensor<4x4xf32> {pxla.tile_dims = [["x"], ["y"]]}) -> (tensor<4x4xf32> {pxla.tile_dims = [["x"], ["y"]]}) {
    %0 = mhlo.constant dense<9.99999997E-7> : tensor<4xf32>
    %1 = mhlo.constant dense<8.000000e+00> : tensor<4xf32>
    %2 = mhlo.constant dense<0.000000e+00> : tensor<f32>
    %3 = mhlo.reduce(%arg0 init: %2) applies mhlo.add across dimensions = [0] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
    %4 = "mhlo.all_reduce"(%3) <{replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %17 = mhlo.add %arg1, %arg2 : tensor<f32>
      mhlo.return %17 : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %5 = mhlo.divide %4, %1 : tensor<4xf32>
    %6 = mhlo.reshape %5 : (tensor<4xf32>) -> tensor<1x4xf32>
    %7 = "mhlo.broadcast_in_dim"(%6) <{broadcast_dimensions = dense<[0, 1]> : tensor<2xi64>}> : (tensor<1x4xf32>) -> tensor<4x4xf32>
    %8 = mhlo.subtract %arg0, %7 : tensor<4x4xf32>
    %9 = mhlo.multiply %8, %8 : tensor<4x4xf32>
    %10 = mhlo.reduce(%9 init: %2) applies mhlo.add across dimensions = [1] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
    %11 = "mhlo.all_reduce"(%10) <{replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %17 = mhlo.add %arg1, %arg2 : tensor<f32>
      mhlo.return %17 : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %12 = mhlo.add %11, %0 : tensor<4xf32>
    %13 = mhlo.sqrt %12 : tensor<4xf32>
    %14 = mhlo.reshape %13 : (tensor<4xf32>) -> tensor<4x1xf32>
    %15 = "mhlo.broadcast_in_dim"(%14) <{broadcast_dimensions = dense<[0, 1]> : tensor<2xi64>}> : (tensor<4x1xf32>) -> tensor<4x4xf32>
    %16 = mhlo.divide %8, %15 : tensor<4x4xf32>
    return %16 : tensor<4x4xf32>
  }
}
