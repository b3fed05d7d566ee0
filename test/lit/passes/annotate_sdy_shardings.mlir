// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-add-sdy-mesh,pxla-annotate-sdy-shardings)' | filecheck %s

// Partition mode on a 2x4 mesh: tiled, replicated (also marked same-data),
// two axes on one dim in both orders, an open dimension; other attributes stay.

// CHECK-LABEL: func.func public @partition_mode
// CHECK-SAME: %{{.*}}: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}
// CHECK-SAME: %{{.*}}: tensor<3xf32> {mhlo.is_same_data_across_replicas = true, sdy.sharding = #sdy.sharding<@mesh, [{}]>}
// CHECK-SAME: %{{.*}}: tensor<8x5xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y"}, {?}]>}
// CHECK-SAME: -> (tensor<8x4xf32> {jax.result_info = "out", sdy.sharding = #sdy.sharding<@mesh, [{"x", "y"}, {}]>}, tensor<16x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y", "x"}, {}]>})
// CHECK-NOT: pxla.dims
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @partition_mode(%a: tensor<8x4xf32> {pxla.dims = [["x"], ["y"]]},
                                   %b: tensor<3xf32> {pxla.dims = [[]]},
                                   %c: tensor<8x5xf32> {pxla.dims = [["y"], "?"]})
      -> (tensor<8x4xf32> {jax.result_info = "out", pxla.dims = [["x", "y"], []]}, tensor<16x4xf32> {pxla.dims = [["y", "x"], []]}) {
    %0 = "mhlo.concatenate"(%a, %a) <{dimension = 0 : i64}> : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
    return %a, %0 : tensor<8x4xf32>, tensor<16x4xf32>
  }
}

// -----

// A serialized ShardingSpec on the module's mesh: its Replicated mesh
// dimension is listed as replicated; a scalar is replicated.

// CHECK-LABEL: func.func public @from_spec
// CHECK-SAME: {sdy.sharding = #sdy.sharding<@mesh, [{"x"}], replicated={"y"}>}
// CHECK-SAME: -> (tensor<f32> {sdy.sharding = #sdy.sharding<@mesh, []>})
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=4,y=2"} {
  func.func public @from_spec(%a: tensor<4xf32> {pxla.sharding_spec = "ShardingSpec((Chunked([4]),), (ShardedAxis(0), Replicated(2)))"})
      -> (tensor<f32> {pxla.dims = []}) {
    %0 = mhlo.constant dense<1.0> : tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// Without pxla.mesh a ShardingSpec brings its own mesh, inlined.

// CHECK-LABEL: func.func public @spec_without_mesh
// CHECK-SAME: {sdy.sharding = #sdy.sharding<mesh<["a0"=2, "a1"=4]>, [{}, {"a1", "a0"}]>}
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @spec_without_mesh(%a: tensor<3x16xf32> {pxla.sharding_spec = "ShardingSpec((NoSharding(), Chunked([4, 2])), (ShardedAxis(1), ShardedAxis(0)))"}) -> tensor<3x16xf32> {
    return %a : tensor<3x16xf32>
  }
}
