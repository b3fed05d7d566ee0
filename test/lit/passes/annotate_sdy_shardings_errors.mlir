// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-annotate-sdy-shardings)'

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  // expected-error @+1 {{no sdy.mesh symbol with the axes of pxla.mesh <["x"=2, "y"=4]>; run pxla-add-sdy-mesh first}}
  func.func public @no_mesh_symbol(%a: tensor<8xf32> {pxla.dims = [["x"]]}) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  // expected-error @+1 {{dimension 0 of the argument 0 (shape (6,)) has size 6, which mesh axes 'y' (size 4) do not divide}}
  func.func public @uneven(%a: tensor<6xf32> {pxla.dims = [["y"]]}) -> tensor<6xf32> {
    return %a : tensor<6xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  // expected-error @+1 {{mesh axis 'z' (mapped to dimension 0 of the result 0) is not in the mesh; its axes are 'x', 'y'}}
  func.func public @unknown_axis(%a: tensor<8xf32>) -> (tensor<8xf32> {pxla.dims = [["z"]]}) {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "x=2,y=4"} {
  // expected-error @+1 {{argument 0: Shardy shardings describe partitions, but the module runs as 8 replicas; use pxla-annotate-shardings for a replica-mode module}}
  func.func public @replica_mode(%a: tensor<8xf32> {pxla.dims = [[]]}) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=8"} {
  sdy.mesh @mesh = <["i"=8]>
  // expected-error @+1 {{argument 0 is a per-device tile (pxla.tile_dims); run pxla-wrap-manual-main first to give @main global types}}
  func.func public @tile(%a: tensor<1x3xf32> {pxla.tile_dims = [["i"], []]}) -> tensor<1x3xf32> {
    return %a : tensor<1x3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  // expected-error @+1 {{argument 0 has both pxla.dims and pxla.sharding_spec; keep one}}
  func.func public @both(%a: tensor<8xf32> {pxla.dims = [["x"]], pxla.sharding_spec = "ShardingSpec((Chunked([8]),), (ShardedAxis(0),))"}) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  // expected-error @+1 {{argument 0: ShardingSpec((Chunked([8]),), (ShardedAxis(0),)) lays the value on a mesh of shape (8,), but pxla.mesh is "x=2,y=4"; the spec's mesh dimensions must be the mesh's axes, in order}}
  func.func public @spec_on_another_mesh(%a: tensor<8xf32> {pxla.sharding_spec = "ShardingSpec((Chunked([8]),), (ShardedAxis(0),))"}) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  // expected-error @+1 {{argument 0: the sharding spans 8 devices but the module has mhlo.num_partitions = 4}}
  func.func public @too_many_devices(%a: tensor<8xf32> {pxla.sharding_spec = "ShardingSpec((Chunked([8]),), (ShardedAxis(0),))"}) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  // expected-error @+1 {{argument 0: dimension 0 is Unstacked(8): a Shardy sharding cannot drop a dimension; use Chunked([8])}}
  func.func public @unstacked(%a: tensor<8xf32> {pxla.sharding_spec = "ShardingSpec((Unstacked(8),), (ShardedAxis(0),))"}) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  // expected-error @+1 {{result 0: pxla shardings need a ranked tensor, got tensor<*xf32>}}
  func.func public @unranked(%a: tensor<*xf32>) -> (tensor<*xf32> {pxla.dims = []}) {
    return %a : tensor<*xf32>
  }
}
