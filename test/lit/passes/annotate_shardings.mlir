// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-annotate-shardings)' | filecheck %s

// Partition mode on a 2x4 mesh: tiled, two axes on one dim, replicated.

// CHECK-LABEL: func.func public @partition_mode
// CHECK-SAME: %{{.*}}: tensor<8x4xf32> {mhlo.sharding = "{devices=[2,4]<=[8]}"}
// CHECK-SAME: %{{.*}}: tensor<3xf32> {mhlo.is_same_data_across_replicas = true, mhlo.sharding = "{replicated}"}
// CHECK-SAME: %{{.*}}: tensor<8x2xf32> {mhlo.sharding = "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}"}
// CHECK-SAME: -> (tensor<8x4xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"}, tensor<16x4xf32> {mhlo.sharding = "{devices=[8,1]<=[2,4]T(1,0)}"})
// CHECK-NOT: pxla.dims
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @partition_mode(%a: tensor<8x4xf32> {pxla.dims = [["x"], ["y"]]},
                                   %b: tensor<3xf32> {pxla.dims = [[]]},
                                   %c: tensor<8x2xf32> {pxla.dims = [["y"], []]})
      -> (tensor<8x4xf32> {pxla.dims = [["x", "y"], []]}, tensor<16x4xf32> {pxla.dims = [["y", "x"], []]}) {
    %0 = "mhlo.concatenate"(%a, %a) <{dimension = 0 : i64}> : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
    return %a, %0 : tensor<8x4xf32>, tensor<16x4xf32>
  }
}

// -----

// A serialized ShardingSpec: [1,2,3,4] split 4 ways, replicated twice.

// CHECK-LABEL: func.func public @from_spec
// CHECK-SAME: {mhlo.sharding = "{devices=[4,2]<=[8] last_tile_dim_replicate}"}
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @from_spec(%a: tensor<4xf32> {pxla.sharding_spec = "ShardingSpec((Chunked([4]),), (ShardedAxis(0), Replicated(2)))"}) -> tensor<4xf32> {
    return %a : tensor<4xf32>
  }
}

// -----

// Unspecified dims: no boundary annotation, a @Sharding constraint inside.

// CHECK-LABEL: func.func public @unspecified
// CHECK-SAME: (%[[A:.*]]: tensor<8x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[S:.*]] = mhlo.custom_call @Sharding(%[[A]]) {backend_config = "unspecified_dims=[1]", mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"}
// CHECK-NEXT: %[[N:.*]] = mhlo.negate %[[S]]
// CHECK-NEXT: %[[R:.*]] = mhlo.custom_call @Sharding(%[[N]]) {backend_config = "unspecified_dims=[0]", mhlo.sharding = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"}
// CHECK-NEXT: return %[[R]]
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @unspecified(%a: tensor<8x4xf32> {pxla.dims = [["x"], "?"]}) -> (tensor<8x4xf32> {pxla.dims = ["?", ["y"]]}) {
    %0 = mhlo.negate %a : tensor<8x4xf32>
    return %0 : tensor<8x4xf32>
  }
}

// -----

// Replica mode: a replicated argument is marked same-data; nothing else.

// CHECK-LABEL: func.func public @replica_mode
// CHECK-SAME: (%{{.*}}: tensor<3xf32> {mhlo.is_same_data_across_replicas = true}, %{{.*}}: tensor<3xf32>) -> tensor<3xf32>
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32, pxla.mesh = "i=4"} {
  func.func public @replica_mode(%a: tensor<3xf32> {pxla.dims = [[]]}, %b: tensor<3xf32>) -> (tensor<3xf32> {pxla.dims = [[]]}) {
    %0 = mhlo.add %a, %b : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// A per-device signature (pxla.tile_dims) in replica mode: the record of the
// global layout stays for whoever runs the module; a replicated argument is
// also marked same-data.

// CHECK-LABEL: func.func public @per_device
// CHECK-SAME: (%{{.*}}: tensor<1x3xf32> {pxla.tile_dims = {{\[\[}}"i"], []]}, %{{.*}}: tensor<3xf32> {mhlo.is_same_data_across_replicas = true, pxla.tile_dims = {{\[\[}}]]}) -> (tensor<1x3xf32> {pxla.tile_dims = {{\[\[}}"i"], []]})
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32, pxla.mesh = "i=4"} {
  func.func public @per_device(%x: tensor<1x3xf32> {pxla.tile_dims = [["i"], []]}, %w: tensor<3xf32> {pxla.tile_dims = [[]]}) -> (tensor<1x3xf32> {pxla.tile_dims = [["i"], []]}) {
    %0 = "mhlo.broadcast_in_dim"(%w) <{broadcast_dimensions = dense<[1]> : tensor<1xi64>}> : (tensor<3xf32>) -> tensor<1x3xf32>
    %1 = mhlo.add %x, %0 : tensor<1x3xf32>
    return %1 : tensor<1x3xf32>
  }
}
