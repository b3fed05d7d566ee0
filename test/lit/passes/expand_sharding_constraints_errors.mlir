// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-expand-sharding-constraints)'

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @no_mesh_symbol(%a: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{no sdy.mesh symbol with the axes of pxla.mesh <["x"=2, "y"=4]>; run pxla-add-sdy-mesh first}}
    %0 = mhlo.custom_call @pxla.sharding_constraint(%a) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func public @missing_dims(%a: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{missing pxla.dims (mesh axes per dimension, e.g. [["x"], []])}}
    %0 = mhlo.custom_call @pxla.sharding_constraint(%a) : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func public @unknown_axis(%a: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{mesh axis 'z' (mapped to dimension 0 of the value) is not in the mesh; its axes are 'x', 'y'}}
    %0 = mhlo.custom_call @pxla.sharding_constraint(%a) {pxla.dims = [["z"]]} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func public @uneven(%a: tensor<6xf32>) -> tensor<6xf32> {
    // expected-error @+1 {{dimension 0 of the constrained value (shape (6,)) has size 6, which mesh axes 'y' (size 4) do not divide: pad that dimension to a multiple of the axes' size, or constrain it over axes that divide it (or none)}}
    %0 = mhlo.custom_call @pxla.sharding_constraint(%a) {pxla.dims = [["y"]]} : (tensor<6xf32>) -> tensor<6xf32>
    return %0 : tensor<6xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "x=8"} {
  func.func public @replica_mode(%a: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{@pxla.sharding_constraint lays a value out over a mesh of 8 devices, but the module runs 8 replicas x 1 partitions; constraints need a partition-mode module over the whole mesh}}
    %0 = mhlo.custom_call @pxla.sharding_constraint(%a) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  sdy.mesh @mesh = <["x"=8]>
  func.func public @two_operands(%a: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{@pxla.sharding_constraint takes one operand and has one result}}
    %0 = mhlo.custom_call @pxla.sharding_constraint(%a, %a) {pxla.dims = [["x"]]} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  sdy.mesh @mesh = <["x"=8]>
  func.func public @bad_dims_kind(%a: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{pxla.dims must be an array with one entry per dimension (e.g. [["x"], []]), got "x"}}
    %0 = mhlo.custom_call @pxla.sharding_constraint(%a) {pxla.dims = "x"} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "data=2,model=4", pxla.manual_axes = ["data"]} {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func private @names_a_manual_axis(%w: tensor<16x32xf32>) -> tensor<16x32xf32> {
    // expected-error @+1 {{mesh axis 'data' is manual here: a sharding constraint inside the manual region can only name the automatic axes (model)}}
    %0 = mhlo.custom_call @pxla.sharding_constraint(%w) {pxla.dims = [["data"], []]} : (tensor<16x32xf32>) -> tensor<16x32xf32>
    return %0 : tensor<16x32xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "data=2,model=4"} {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func private @unknown_manual_axis(%w: tensor<16x32xf32>) -> tensor<16x32xf32> {
    // expected-error @+1 {{manual axis 'i' is not in the mesh; its axes are 'data', 'model'}}
    %0 = mhlo.custom_call @pxla.sharding_constraint(%w) {pxla.dims = [[], ["model"]], pxla.manual_axes = ["i"]} : (tensor<16x32xf32>) -> tensor<16x32xf32>
    return %0 : tensor<16x32xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 2 : i32, pxla.mesh = "data=2,model=4", pxla.manual_axes = ["data"]} {
  func.func private @partitioned_replica_mode(%w: tensor<16x32xf32>) -> tensor<16x32xf32> {
    // expected-error @+1 {{@pxla.sharding_constraint lays a value out over a mesh of 8 devices, but the module runs 2 replicas x 4 partitions; constraints need a partition-mode module over the whole mesh}}
    %0 = mhlo.custom_call @pxla.sharding_constraint(%w) {pxla.dims = [[], ["model"]]} : (tensor<16x32xf32>) -> tensor<16x32xf32>
    return %0 : tensor<16x32xf32>
  }
}
