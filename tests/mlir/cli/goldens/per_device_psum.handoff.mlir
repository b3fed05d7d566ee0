// CHECK-GEN-BEGIN (pxla-mlir update-checks rewrites the lines up to CHECK-GEN-END)
// CHECK-LABEL: module @per_device_psum attributes {
// CHECK-SAME:    mhlo.num_partitions = 1 : i32,
// CHECK-SAME:    mhlo.num_replicas = 4 : i32} {
// CHECK-LABEL: func.func public @main(
// CHECK-SAME:    %[[ARG0:[0-9A-Za-z_$.-]+]]: tensor<3xf32>)
// CHECK-SAME:    -> (tensor<3xf32>, tensor<i32>) {
// CHECK-NEXT:      %[[ALL_REDUCE:[0-9A-Za-z_$.-]+]] = "mhlo.all_reduce"(%[[ARG0]]) <{replica_groups = dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>}> ({
// CHECK-NEXT:      ^bb0(%[[ARG1:[0-9A-Za-z_$.-]+]]: tensor<f32>, %[[ARG2:[0-9A-Za-z_$.-]+]]: tensor<f32>):
// CHECK-NEXT:        %[[ADD:[0-9A-Za-z_$.-]+]] = mhlo.add %[[ARG1]], %[[ARG2]] : tensor<f32>
// CHECK-NEXT:        mhlo.return %[[ADD]] : tensor<f32>
// CHECK-NEXT:      }) : (tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT:      %[[ERF:[0-9A-Za-z_$.-]+]] = mhlo.erf %[[ALL_REDUCE]] : tensor<3xf32>
// CHECK-NEXT:      %[[REPLICA_ID:[0-9A-Za-z_$.-]+]] = mhlo.replica_id : tensor<ui32>
// CHECK-NEXT:      %[[CONVERT:[0-9A-Za-z_$.-]+]] = mhlo.convert %[[REPLICA_ID]] : (tensor<ui32>) -> tensor<i32>
// CHECK-NEXT:      return %[[ERF]], %[[CONVERT]] : tensor<3xf32>, tensor<i32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK-GEN-END
