// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-expand-manual-sharding)'

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @no_mesh(%x: tensor<8xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{no pxla.mesh on the op or the module}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {pxla.mesh = "x=2,y=4"} {
  func.func public @unknown_axis(%x: tensor<8xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{mesh axis 'w' (mapped to dimension 0 of the full value) is not in the mesh; its axes are 'x', 'y'}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["w"]]} : (tensor<8xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {pxla.mesh = "x=2,y=4"} {
  func.func public @axis_twice(%x: tensor<8x8xf32>) -> tensor<4x4xf32> {
    // expected-error @+1 {{mesh axis 'x' splits dimensions 0 and 1}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"], ["x"]]} : (tensor<8x8xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
}

// -----

module attributes {pxla.mesh = "x=2,y=4"} {
  func.func public @uneven(%x: tensor<6xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{dimension 0 of the full value (shape (6,)) has size 6, which mesh axes 'y' (size 4) do not divide}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["y"]]} : (tensor<6xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

module attributes {pxla.mesh = "x=2,y=4"} {
  func.func public @wrong_tile(%x: tensor<8xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{the tile type must be tensor<4xf32> (the full tensor<8xf32> split by {'x': 0}), got tensor<2xf32>}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// -----

module attributes {pxla.mesh = "x=2,y=4"} {
  func.func public @automatic_axis_divides_no_tile(%x: tensor<8xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{the tile type must be tensor<8xf32> (the full tensor<8xf32> split by {}), got tensor<4xf32>}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]], pxla.manual_axes = ["y"]} : (tensor<8xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {pxla.mesh = "x=2,y=4"} {
  func.func public @bad_dims(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{pxla.dims has 2 entries but the full value has rank 1}}
    %0 = mhlo.custom_call @pxla.shard_to_full(%x) {pxla.dims = [[], []]} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// expected-error @+1 {{bad pxla.mesh 'x=2;y=4': expected comma-separated name=size}}
module attributes {pxla.mesh = "x=2;y=4"} {
  func.func public @bad_mesh(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = mhlo.custom_call @pxla.shard_to_full(%x) {pxla.dims = [[]]} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module attributes {pxla.mesh = "x=2,y=4"} {
  func.func public @unknown_manual(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{manual axis 'z' is not in the mesh}}
    %0 = mhlo.custom_call @pxla.shard_to_full(%x) {pxla.dims = [[]], pxla.manual_axes = ["z"]} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  func.func public @manual_axes_not_a_list(%x: tensor<8xf32>) -> tensor<1xf32> {
    // expected-error @+1 {{pxla.manual_axes must be an array of strings (e.g. ["x", "y"]), got "x"}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]], pxla.manual_axes = "x"} : (tensor<8xf32>) -> tensor<1xf32>
    return %0 : tensor<1xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  func.func public @dims_unit(%x: tensor<8xf32>) -> tensor<1xf32> {
    // expected-error @+1 {{pxla.dims must be an array with one entry per dimension (e.g. [["x"], []]), got unit}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims} : (tensor<8xf32>) -> tensor<1xf32>
    return %0 : tensor<1xf32>
  }
}

// -----

// expected-error @+1 {{bad pxla.mesh 'x=0': mesh axis 'x' has size 0; sizes must be positive}}
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=0"} {
  func.func public @zero_size_mesh_axis(%x: tensor<8xf32>) -> tensor<1xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<1xf32>
    return %0 : tensor<1xf32>
  }
}
