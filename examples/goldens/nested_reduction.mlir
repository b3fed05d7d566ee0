module @pmap_two_level_sum attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "host=2,_pxla_rep=4"} {
  func.func public @main(%arg0: tensor<1x4x128xf32> {pxla.tile_dims = [["host"], [], []]}) -> (tensor<1x128x4xf32> {pxla.tile_dims = [["host"], [], []]}, tensor<1x4x128xf32> {pxla.tile_dims = [["host"], [], []]}) {
    %0 = mhlo.constant dense<0> : tensor<i32>
    %1 = mhlo.constant dense<4> : tensor<ui32>
    %2 = mhlo.reshape %arg0 : (tensor<1x4x128xf32>) -> tensor<4x128xf32>
    %3 = mhlo.replica_id : tensor<ui32>
    %4 = mhlo.remainder %3, %1 : tensor<ui32>
    %5 = mhlo.convert %4 : (tensor<ui32>) -> tensor<i32>
    %6 = "mhlo.dynamic_slice"(%2, %5, %0) <{slice_sizes = dense<[1, 128]> : tensor<2xi64>}> : (tensor<4x128xf32>, tensor<i32>, tensor<i32>) -> tensor<1x128xf32>
    %7 = mhlo.reshape %6 : (tensor<1x128xf32>) -> tensor<128xf32>
    %8 = "mhlo.all_reduce"(%7) <{replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %16 = mhlo.add %arg1, %arg2 : tensor<f32>
      mhlo.return %16 : tensor<f32>
    }) : (tensor<128xf32>) -> tensor<128xf32>
    %9 = "mhlo.all_reduce"(%8) <{replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %16 = mhlo.add %arg1, %arg2 : tensor<f32>
      mhlo.return %16 : tensor<f32>
    }) : (tensor<128xf32>) -> tensor<128xf32>
    %10 = mhlo.reshape %8 : (tensor<128xf32>) -> tensor<128x1xf32>
    %11 = "mhlo.all_gather"(%10) <{all_gather_dim = 1 : i64, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> : (tensor<128x1xf32>) -> tensor<128x4xf32>
    %12 = mhlo.reshape %9 : (tensor<128xf32>) -> tensor<1x128xf32>
    %13 = "mhlo.all_gather"(%12) <{all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> : (tensor<1x128xf32>) -> tensor<4x128xf32>
    %14 = mhlo.reshape %11 : (tensor<128x4xf32>) -> tensor<1x128x4xf32>
    %15 = mhlo.reshape %13 : (tensor<4x128xf32>) -> tensor<1x4x128xf32>
    return %14, %15 : tensor<1x128x4xf32>, tensor<1x4x128xf32>
  }
}
