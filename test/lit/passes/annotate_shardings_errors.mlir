// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-annotate-shardings)'

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  // expected-error @+1 {{dimension 0 of the argument 0 (shape (6,)) has size 6, which mesh axes 'y' (size 4) do not divide}}
  func.func public @uneven(%a: tensor<6xf32> {pxla.dims = [["y"]]}) -> tensor<6xf32> {
    return %a : tensor<6xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  // expected-error @+1 {{mesh axis 'z' (mapped to dimension 0 of the result 0) is not in the mesh; its axes are 'x', 'y'}}
  func.func public @unknown_axis(%a: tensor<8xf32>) -> (tensor<8xf32> {pxla.dims = [["z"]]}) {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  // expected-error @+1 {{argument 0: the sharding spans 8 devices but the module has 4 (num_replicas = 1, num_partitions = 4)}}
  func.func public @too_many_devices(%a: tensor<8xf32> {pxla.dims = [["x"]]}) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "x=2,y=4"} {
  // expected-error @+1 {{argument 0 is sharded ({devices=[2,4]<=[8] last_tile_dim_replicate}) but the module runs as 8 replicas}}
  func.func public @sharded_in_replica_mode(%a: tensor<8xf32> {pxla.dims = [["x"]]}) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  // expected-error @+1 {{argument 0: cannot parse sharding spec 'ShardingSpec((Chunked([4]),), (Replicated(2),))': ShardingSpec((Chunked([4]),), (Replicated(2),)): sharded axis 0 is never placed on the mesh}}
  func.func public @spec_axis_never_used(%a: tensor<4xf32> {pxla.sharding_spec = "ShardingSpec((Chunked([4]),), (Replicated(2),))"}) -> tensor<4xf32> {
    return %a : tensor<4xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  // expected-error @+1 {{argument 0: dimension 0 is Unstacked(8): an HLO sharding cannot drop a dimension; use Chunked([8])}}
  func.func public @unstacked(%a: tensor<8xf32> {pxla.sharding_spec = "ShardingSpec((Unstacked(8),), (ShardedAxis(0),))"}) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  // expected-error @+1 {{argument 0 has both pxla.dims and pxla.sharding_spec; keep one}}
  func.func public @both(%a: tensor<8xf32> {pxla.dims = [["x"]], pxla.sharding_spec = "x"}) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  // expected-error @+1 {{no pxla.mesh on the op or the module}}
  func.func public @no_mesh(%a: tensor<8xf32> {pxla.dims = [["x"]]}) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  // expected-error @+1 {{pxla.sharding_spec must be a string, got [["nope"]]}}
  func.func public @spec_not_a_string(%x: tensor<8xf32> {pxla.sharding_spec = [["nope"]]}) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  // expected-error @+1 {{pxla.dims must be an array with one entry per dimension (e.g. [["x"], []]), got "x"}}
  func.func public @dims_not_an_array(%x: tensor<8xf32> {pxla.dims = "x"}) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  // expected-error @+1 {{each entry of pxla.dims entry 0 must be a string, got 1 : i64}}
  func.func public @dims_entry_not_strings(%x: tensor<8xf32> {pxla.dims = [[1]]}) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

// expected-error @+1 {{bad pxla.mesh 'x=4294967296': mesh {'x': 4294967296} spans 4294967296 devices; at most 1048576 are supported}}
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=4294967296"} {
  func.func public @mesh_too_big(%x: tensor<8xf32> {pxla.dims = [["x"]]}) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

// expected-error @+1 {{pxla.mesh must be a string, got 8 : i64}}
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = 8} {
  func.func public @mesh_not_a_string(%x: tensor<8xf32> {pxla.dims = [["x"]]}) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}
