// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-expand-manual-computation)'

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  func.func public @no_mesh_symbol(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{no sdy.mesh symbol with the axes of pxla.mesh <["x"=8]>; run pxla-add-sdy-mesh first}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<1xf32>
    %1 = mhlo.custom_call @pxla.shard_to_full(%0) {pxla.dims = [["x"]]} : (tensor<1xf32>) -> tensor<8xf32>
    return %1 : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  sdy.mesh @mesh = <["x"=8]>
  func.func public @global_value_in_tile_code(%x: tensor<8xf32>, %w: tensor<1xf32>) -> tensor<8xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<1xf32>
    // expected-error @+1 {{per-device code uses a global value (tensor<1xf32>) directly; pass it through pxla.full_to_shard (or make it a constant)}}
    %1 = mhlo.add %0, %w : tensor<1xf32>
    %2 = mhlo.custom_call @pxla.shard_to_full(%1) {pxla.dims = [["x"]]} : (tensor<1xf32>) -> tensor<8xf32>
    return %2 : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  sdy.mesh @mesh = <["x"=8]>
  func.func public @tile_returned(%x: tensor<8xf32>) -> tensor<1xf32> {
    // expected-error @+1 {{a tile (tensor<1xf32>) reaches func.return without pxla.shard_to_full}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<1xf32>
    return %0 : tensor<1xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  sdy.mesh @mesh = <["x"=8]>
  func.func public @tile_used_outside(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<1xf32>) {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<1xf32>
    %1 = mhlo.negate %0 : tensor<1xf32>
    %2 = mhlo.custom_call @pxla.shard_to_full(%1) {pxla.dims = [["x"]]} : (tensor<1xf32>) -> tensor<8xf32>
    // expected-error @+1 {{a tile (tensor<1xf32>) reaches func.return without pxla.shard_to_full}}
    %3 = mhlo.abs %1 : tensor<1xf32>
    return %2, %3 : tensor<8xf32>, tensor<1xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func public @manual_axes_disagree(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]], pxla.manual_axes = ["x"]} : (tensor<8xf32>) -> tensor<4xf32>
    // expected-error @+1 {{this placeholder's mesh {'x': 2, 'y': 4} / manual axes ['x', 'y'] differ from {'x': 2, 'y': 4} / ['x'] of mhlo.custom_call in the same manual region}}
    %1 = mhlo.custom_call @pxla.shard_to_full(%0) {pxla.dims = [["x"]]} : (tensor<4xf32>) -> tensor<8xf32>
    return %1 : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  sdy.mesh @mesh = <["x"=8]>
  func.func public @feeds_itself(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<1xf32>
    // expected-error @+1 {{cannot form one manual region: one of its results feeds one of its own inputs}}
    %1 = mhlo.custom_call @pxla.shard_to_full(%0) {pxla.dims = [["x"]]} : (tensor<1xf32>) -> tensor<8xf32>
    %2 = mhlo.negate %1 : tensor<8xf32>
    %3 = mhlo.custom_call @pxla.full_to_shard(%2) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<1xf32>
    %4 = mhlo.add %0, %3 : tensor<1xf32>
    %5 = mhlo.custom_call @pxla.shard_to_full(%4) {pxla.dims = [["x"]]} : (tensor<1xf32>) -> tensor<8xf32>
    return %5 : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  sdy.mesh @mesh = <["x"=8]>
  func.func public @full_value_as_tile(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<1xf32>
    %1 = mhlo.custom_call @pxla.shard_to_full(%0) {pxla.dims = [["x"]]} : (tensor<1xf32>) -> tensor<8xf32>
    // expected-error @+1 {{a full value from pxla.shard_to_full is used as a tile: go through pxla.full_to_shard again}}
    %2 = "mhlo.slice"(%1) <{limit_indices = dense<1> : tensor<1xi64>, start_indices = dense<0> : tensor<1xi64>, strides = dense<1> : tensor<1xi64>}> : (tensor<8xf32>) -> tensor<1xf32>
    %3 = mhlo.add %0, %2 : tensor<1xf32>
    %4 = mhlo.custom_call @pxla.shard_to_full(%3) {pxla.dims = [["x"]]} : (tensor<1xf32>) -> tensor<8xf32>
    return %4 : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func public @wrong_tile(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{the tile type must be tensor<4xf32> (the full tensor<8xf32> split by {'x': 0}), got tensor<2xf32>}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<2xf32>
    return %x : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func public @automatic_before_manual(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{dimension 0 is split by ['x', 'y']: manual axes (y) must come before the automatic ones of a dimension (major first)}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x", "y"]], pxla.manual_axes = ["y"]} : (tensor<8xf32>) -> tensor<2xf32>
    return %x : tensor<8xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  sdy.mesh @mesh = <["x"=8]>
  func.func public @stablehlo_placeholder(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{placeholder @pxla.full_to_shard is still a stablehlo.custom_call: legalize the module to MHLO first}}
    %0 = stablehlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<1xf32>
    return %x : tensor<8xf32>
  }
}
