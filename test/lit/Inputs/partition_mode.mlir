module @spmd attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<ui32>) {
    %0 = "mhlo.all_reduce"(%x) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<3xf32>) -> tensor<3xf32>
    %1 = mhlo.add %0, %0 : tensor<3xf32>
    %2 = mhlo.add %0, %0 : tensor<3xf32>
    %3 = mhlo.multiply %1, %2 : tensor<3xf32>
    %4 = mhlo.partition_id : tensor<ui32>
    return %3, %4 : tensor<3xf32>, tensor<ui32>
  }
}
