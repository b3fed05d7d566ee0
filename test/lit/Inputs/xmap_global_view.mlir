module @xmap__lambda attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @main(%arg0: tensor<4x8x3xf32> {pxla.dims = [["x"], ["y"], []]}) -> (tensor<4x8x3xf32> {pxla.dims = [["x"], ["y"], []]}) {
    %0 = mhlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = mhlo.reduce(%arg0 init: %0) applies mhlo.add across dimensions = [1] : (tensor<4x8x3xf32>, tensor<f32>) -> tensor<4x3xf32>
    %2 = "mhlo.iota"() <{iota_dimension = 0 : i64}> : () -> tensor<4xi32>
    %3 = mhlo.convert %2 : (tensor<4xi32>) -> tensor<4xf32>
    %4 = "mhlo.broadcast_in_dim"(%3) <{broadcast_dimensions = dense<0> : tensor<1xi64>}> : (tensor<4xf32>) -> tensor<4x1xf32>
    %5 = "mhlo.broadcast_in_dim"(%4) <{broadcast_dimensions = dense<[0, 1]> : tensor<2xi64>}> : (tensor<4x1xf32>) -> tensor<4x3xf32>
    %6 = mhlo.add %1, %5 : tensor<4x3xf32>
    %7 = "mhlo.broadcast_in_dim"(%6) <{broadcast_dimensions = dense<[0, 2]> : tensor<2xi64>}> : (tensor<4x3xf32>) -> tensor<4x8x3xf32>
    return %7 : tensor<4x8x3xf32>
  }
}
