module @pmap_train_step attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "batch=8"} {
  func.func public @main(%arg0: tensor<16x32xf32> {mhlo.is_same_data_across_replicas = true, pxla.tile_dims = [[], []]}, %arg1: tensor<32xf32> {mhlo.is_same_data_across_replicas = true, pxla.tile_dims = [[]]}, %arg2: tensor<32x4xf32> {mhlo.is_same_data_across_replicas = true, pxla.tile_dims = [[], []]}, %arg3: tensor<1x16x16xf32> {pxla.tile_dims = [["batch"], [], []]}, %arg4: tensor<1x16x4xf32> {pxla.tile_dims = [["batch"], [], []]}) -> (tensor<16x32xf32> {pxla.tile_dims = [[], []]}, tensor<32xf32> {pxla.tile_dims = [[]]}, tensor<32x4xf32> {pxla.tile_dims = [[], []]}, tensor<f32> {pxla.tile_dims = []}) {
    %0 = mhlo.constant dense<1.000000e-01> : tensor<32x4xf32>
    %1 = mhlo.constant dense<1.000000e-01> : tensor<32xf32>
    %2 = mhlo.constant dense<1.000000e-01> : tensor<16x32xf32>
    %3 = mhlo.constant dense<8.000000e+00> : tensor<32x4xf32>
    %4 = mhlo.constant dense<8.000000e+00> : tensor<32xf32>
    %5 = mhlo.constant dense<8.000000e+00> : tensor<16x32xf32>
    %6 = mhlo.constant dense<1.562500e-02> : tensor<16x4xf32>
    %7 = mhlo.constant dense<2.000000e+00> : tensor<16x4xf32>
    %8 = mhlo.constant dense<1.000000e+00> : tensor<16x32xf32>
    %9 = mhlo.constant dense<8.000000e+00> : tensor<f32>
    %10 = mhlo.constant dense<6.400000e+01> : tensor<f32>
    %11 = mhlo.constant dense<0.000000e+00> : tensor<f32>
    %12 = mhlo.reshape %arg3 : (tensor<1x16x16xf32>) -> tensor<16x16xf32>
    %13 = mhlo.reshape %arg4 : (tensor<1x16x4xf32>) -> tensor<16x4xf32>
    %14 = "mhlo.dot_general"(%12, %arg0) <{dot_dimension_numbers = #mhlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#mhlo<precision DEFAULT>, #mhlo<precision DEFAULT>]}> : (tensor<16x16xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
    %15 = mhlo.reshape %arg1 : (tensor<32xf32>) -> tensor<1x32xf32>
    %16 = "mhlo.broadcast_in_dim"(%15) <{broadcast_dimensions = dense<[0, 1]> : tensor<2xi64>}> : (tensor<1x32xf32>) -> tensor<16x32xf32>
    %17 = mhlo.add %14, %16 : tensor<16x32xf32>
    %18 = mhlo.tanh %17 : tensor<16x32xf32>
    %19 = mhlo.add %18, %8 : tensor<16x32xf32>
    %20 = mhlo.subtract %8, %18 : tensor<16x32xf32>
    %21 = mhlo.multiply %19, %20 : tensor<16x32xf32>
    %22 = "mhlo.dot_general"(%18, %arg2) <{dot_dimension_numbers = #mhlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>, precision_config = [#mhlo<precision DEFAULT>, #mhlo<precision DEFAULT>]}> : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x4xf32>
    %23 = mhlo.subtract %22, %13 : tensor<16x4xf32>
    %24 = mhlo.multiply %23, %23 : tensor<16x4xf32>
    %25 = mhlo.multiply %23, %7 : tensor<16x4xf32>
    %26 = mhlo.reduce(%24 init: %11) applies mhlo.add across dimensions = [0, 1] : (tensor<16x4xf32>, tensor<f32>) -> tensor<f32>
    %27 = mhlo.divide %26, %10 : tensor<f32>
    %28 = mhlo.multiply %25, %6 : tensor<16x4xf32>
    %29 = "mhlo.dot_general"(%28, %18) <{dot_dimension_numbers = #mhlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>, precision_config = [#mhlo<precision DEFAULT>, #mhlo<precision DEFAULT>]}> : (tensor<16x4xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
    %30 = "mhlo.transpose"(%29) <{permutation = dense<[1, 0]> : tensor<2xi64>}> : (tensor<4x32xf32>) -> tensor<32x4xf32>
    %31 = "mhlo.dot_general"(%28, %arg2) <{dot_dimension_numbers = #mhlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1]>, precision_config = [#mhlo<precision DEFAULT>, #mhlo<precision DEFAULT>]}> : (tensor<16x4xf32>, tensor<32x4xf32>) -> tensor<16x32xf32>
    %32 = mhlo.multiply %31, %21 : tensor<16x32xf32>
    %33 = mhlo.reduce(%32 init: %11) applies mhlo.add across dimensions = [0] : (tensor<16x32xf32>, tensor<f32>) -> tensor<32xf32>
    %34 = mhlo.reshape %33 : (tensor<32xf32>) -> tensor<1x32xf32>
    %35 = mhlo.reduce(%34 init: %11) applies mhlo.add across dimensions = [0] : (tensor<1x32xf32>, tensor<f32>) -> tensor<32xf32>
    %36 = "mhlo.dot_general"(%32, %12) <{dot_dimension_numbers = #mhlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>, precision_config = [#mhlo<precision DEFAULT>, #mhlo<precision DEFAULT>]}> : (tensor<16x32xf32>, tensor<16x16xf32>) -> tensor<32x16xf32>
    %37 = "mhlo.transpose"(%36) <{permutation = dense<[1, 0]> : tensor<2xi64>}> : (tensor<32x16xf32>) -> tensor<16x32xf32>
    %38 = "mhlo.all_reduce"(%37) <{replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}> ({
    ^bb0(%arg5: tensor<f32>, %arg6: tensor<f32>):
      %52 = mhlo.add %arg5, %arg6 : tensor<f32>
      mhlo.return %52 : tensor<f32>
    }) : (tensor<16x32xf32>) -> tensor<16x32xf32>
    %39 = "mhlo.all_reduce"(%35) <{replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}> ({
    ^bb0(%arg5: tensor<f32>, %arg6: tensor<f32>):
      %52 = mhlo.add %arg5, %arg6 : tensor<f32>
      mhlo.return %52 : tensor<f32>
    }) : (tensor<32xf32>) -> tensor<32xf32>
    %40 = "mhlo.all_reduce"(%30) <{replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}> ({
    ^bb0(%arg5: tensor<f32>, %arg6: tensor<f32>):
      %52 = mhlo.add %arg5, %arg6 : tensor<f32>
      mhlo.return %52 : tensor<f32>
    }) : (tensor<32x4xf32>) -> tensor<32x4xf32>
    %41 = mhlo.divide %38, %5 : tensor<16x32xf32>
    %42 = mhlo.divide %39, %4 : tensor<32xf32>
    %43 = mhlo.divide %40, %3 : tensor<32x4xf32>
    %44 = mhlo.multiply %41, %2 : tensor<16x32xf32>
    %45 = mhlo.subtract %arg0, %44 : tensor<16x32xf32>
    %46 = mhlo.multiply %42, %1 : tensor<32xf32>
    %47 = mhlo.subtract %arg1, %46 : tensor<32xf32>
    %48 = mhlo.multiply %43, %0 : tensor<32x4xf32>
    %49 = mhlo.subtract %arg2, %48 : tensor<32x4xf32>
    %50 = "mhlo.all_reduce"(%27) <{replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}> ({
    ^bb0(%arg5: tensor<f32>, %arg6: tensor<f32>):
      %52 = mhlo.add %arg5, %arg6 : tensor<f32>
      mhlo.return %52 : tensor<f32>
    }) : (tensor<f32>) -> tensor<f32>
    %51 = mhlo.divide %50, %9 : tensor<f32>
    return %45, %47, %49, %51 : tensor<16x32xf32>, tensor<32xf32>, tensor<32x4xf32>, tensor<f32>
  }
}
