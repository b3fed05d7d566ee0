// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-verify-form)'

// One run reports every problem, each at the op that carries it: the
// docstring's misspelled stride, in StableHLO as import leaves it.

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "i=2,_pxla_rep=4"} {
  func.func public @main(%arg0: tensor<1x4x3xf32> {pxla.tile_dims = [["i"], [], []]}) -> tensor<3xf32> {
    %0 = stablehlo.reshape %arg0 : (tensor<1x4x3xf32>) -> tensor<4x3xf32>
    // expected-error @+2 {{unknown attribute pxla.strides: the pxla form has no such name; did you mean 'pxla.stride'?}}
    // expected-error @+1 {{@pxla.shard needs pxla.stride (integer attributes)}}
    %1 = stablehlo.custom_call @pxla.shard(%0) {pxla.axis = 0 : i64, pxla.axis_size = 4 : i64, pxla.strides = 1 : i64} : (tensor<4x3xf32>) -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<f32> {
    // expected-error @+1 {{unknown placeholder @pxla.shrad; the pxla form's placeholders are @pxla.full_to_shard, @pxla.shard, @pxla.shard_to_full, @pxla.sharding_constraint, @pxla.unshard; did you mean 'pxla.shard'?}}
    %0 = mhlo.custom_call @pxla.shrad(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// A placeholder that does not fit the module's devices.

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32} {
  func.func public @main(%x: tensor<4x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{@pxla.shard: axis 'j' of size 4 with stride 4 does not fit the module's 8 devices (num_replicas * num_partitions)}}
    %0 = stablehlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 4 : i64, pxla.stride = 4 : i64} : (tensor<4x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// A malformed mesh is reported once, though every value laid out on it reads it.

// expected-error @+1 {{bad pxla.mesh 'x=2;y=4': expected comma-separated name=size, e.g. "x=2,y=4"}}
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2;y=4"} {
  func.func public @main(%x: tensor<8xf32> {pxla.dims = [["x"]]}) -> (tensor<8xf32> {pxla.dims = [["x"]]}) {
    return %x : tensor<8xf32>
  }
}

// -----

// pxla.manual_axes names axes of a mesh the module must have.

// expected-error @+1 {{pxla.manual_axes names mesh axes, but the module has no pxla.mesh; add one (e.g. pxla.mesh = "x=2,y=4")}}
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.manual_axes = ["x"]} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

// expected-error @+1 {{manual axis 'z' is not in the mesh; its axes are 'x', 'y'}}
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.manual_axes = ["z"], pxla.mesh = "x=2,y=4"} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

// Boundaries: one layout per value, valid against the mesh and the value's type.

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  // expected-error @+4 {{argument 0 has both pxla.dims (a global value) and pxla.tile_dims (a per-device tile); keep the one its type is}}
  // expected-error @+3 {{dimension 0 of the argument 1 (shape (6,)) has size 6, which mesh axes 'y' (size 4) do not divide}}
  // expected-error @+2 {{unknown attribute pxla.dim: the pxla form has no such name; did you mean 'pxla.dims'?}}
  // expected-error @+1 {{mesh axis 'z' (mapped to dimension 0 of the result 0) is not in the mesh; its axes are 'x', 'y'}}
  func.func public @main(%a: tensor<8xf32> {pxla.dims = [["x"]], pxla.tile_dims = [["x"]]}, %b: tensor<6xf32> {pxla.dims = [["y"]]}, %c: tensor<8xf32> {pxla.dim = [["x"]]}) -> (tensor<8xf32> {pxla.dims = [["z"]]}) {
    return %a : tensor<8xf32>
  }
}

// -----

// A manual region's boundary: its tile is the full value split by the manual axes.

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{the tile type must be tensor<4xf32> (the full tensor<8xf32> split by {'x': 0}), got tensor<2xf32>}}
    %0 = stablehlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]], pxla.manual_axes = ["x"]} : (tensor<8xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    // expected-error @+1 {{missing pxla.dims (mesh axes per dimension, e.g. [["x"], []])}}
    %0 = mhlo.custom_call @pxla.sharding_constraint(%x) {} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    return %0 : tensor<2x8xf32>
  }
}

// -----

// expected-error @+1 {{mhlo.num_replicas must be between 1 and 1048576, got 0}}
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 0 : i32} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<f32> {
    %0 = stablehlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
