// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-add-sdy-mesh,pxla-expand-manual-computation)' | filecheck %s

// What pxla-wrap-manual-main builds: tiles -> call of the per-device body ->
// full values. One region; the call moves into it.

// CHECK-LABEL: func.func public @wrapped
// CHECK-SAME: (%[[X:.*]]: tensor<8x3xf32>, %[[W:.*]]: tensor<3xf32>)
// CHECK-NEXT: %[[R:.*]] = sdy.manual_computation(%[[X]], %[[W]]) in_shardings=[<@mesh, [{"i"}, {}]>, <@mesh, [{}]>] out_shardings=[<@mesh, [{"i"}, {}]>] manual_axes={"i"} (%[[T:.*]]: tensor<1x3xf32>, %[[TW:.*]]: tensor<3xf32>) {
// CHECK-NEXT: %[[C:.*]] = func.call @main_per_device(%[[T]], %[[TW]]) : (tensor<1x3xf32>, tensor<3xf32>) -> tensor<1x3xf32>
// CHECK-NEXT: sdy.return %[[C]] : tensor<1x3xf32>
// CHECK-NEXT: } : (tensor<8x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
// CHECK-NEXT: return %[[R]] : tensor<8x3xf32>
// CHECK-NOT: @pxla.
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=8"} {
  func.func private @main_per_device(%t: tensor<1x3xf32>, %w: tensor<3xf32>) -> tensor<1x3xf32> {
    return %t : tensor<1x3xf32>
  }
  func.func public @wrapped(%x: tensor<8x3xf32>, %w: tensor<3xf32>) -> tensor<8x3xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["i"], []]} : (tensor<8x3xf32>) -> tensor<1x3xf32>
    %1 = mhlo.custom_call @pxla.full_to_shard(%w) {pxla.dims = [[]]} : (tensor<3xf32>) -> tensor<3xf32>
    %2 = func.call @main_per_device(%0, %1) : (tensor<1x3xf32>, tensor<3xf32>) -> tensor<1x3xf32>
    %3 = mhlo.custom_call @pxla.shard_to_full(%2) {pxla.dims = [["i"], []]} : (tensor<1x3xf32>) -> tensor<8x3xf32>
    return %3 : tensor<8x3xf32>
  }
}

// -----

// Per-device code written inline: the ops between the placeholders move into
// the region; the device index (partition_id and what is computed from it
// only) and constants are copied in, as the region is isolated from above;
// the constant also used outside stays there.

// CHECK-LABEL: func.func public @inline_body
// CHECK-SAME: (%[[X:.*]]: tensor<8x12xf32>)
// CHECK-NEXT: %[[K:.*]] = mhlo.constant dense<2.000000e+00> : tensor<4x3xf32>
// CHECK-NEXT: %[[R:.*]]:2 = sdy.manual_computation(%[[X]]) in_shardings=[<@mesh, [{"x"}, {"y"}]>] out_shardings=[<@mesh, [{"x"}, {"y"}]>, <@mesh, [{"x"}, {}]>] manual_axes={"x", "y"} (%[[T:.*]]: tensor<4x3xf32>) {
// CHECK-NEXT: %[[P:.*]] = mhlo.partition_id : tensor<ui32>
// CHECK-NEXT: %[[PF:.*]] = mhlo.convert %[[P]] : (tensor<ui32>) -> tensor<f32>
// CHECK-NEXT: %[[PB:.*]] = "mhlo.broadcast_in_dim"(%[[PF]])
// CHECK-NEXT: %[[K2:.*]] = mhlo.constant dense<2.000000e+00> : tensor<4x3xf32>
// CHECK-NEXT: %[[S:.*]] = "mhlo.all_reduce"(%[[T]])
// CHECK: %[[A:.*]] = mhlo.add %[[T]], %[[S]] : tensor<4x3xf32>
// CHECK-NEXT: %[[B:.*]] = mhlo.add %[[A]], %[[PB]] : tensor<4x3xf32>
// CHECK-NEXT: %[[M:.*]] = mhlo.multiply %[[B]], %[[K2]] : tensor<4x3xf32>
// CHECK-NEXT: sdy.return %[[M]], %[[S]] : tensor<4x3xf32>, tensor<4x3xf32>
// CHECK-NEXT: } : (tensor<8x12xf32>) -> (tensor<8x12xf32>, tensor<8x3xf32>)
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1, %[[K]]
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @inline_body(%x: tensor<8x12xf32>) -> (tensor<8x12xf32>, tensor<8x3xf32>, tensor<4x3xf32>) {
    %k = mhlo.constant dense<2.0> : tensor<4x3xf32>
    %t = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"], ["y"]]} : (tensor<8x12xf32>) -> tensor<4x3xf32>
    %s = "mhlo.all_reduce"(%t) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>,
        replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>, use_global_device_ids}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %sum = mhlo.add %a, %b : tensor<f32>
      mhlo.return %sum : tensor<f32>
    }) : (tensor<4x3xf32>) -> tensor<4x3xf32>
    %pid = mhlo.partition_id : tensor<ui32>
    %pidf = mhlo.convert %pid : (tensor<ui32>) -> tensor<f32>
    %pidb = "mhlo.broadcast_in_dim"(%pidf) <{broadcast_dimensions = dense<> : tensor<0xi64>}> : (tensor<f32>) -> tensor<4x3xf32>
    %r0 = mhlo.add %t, %s : tensor<4x3xf32>
    %r1 = mhlo.add %r0, %pidb : tensor<4x3xf32>
    %r = mhlo.multiply %r1, %k : tensor<4x3xf32>
    %o1 = mhlo.custom_call @pxla.shard_to_full(%r) {pxla.dims = [["x"], ["y"]]} : (tensor<4x3xf32>) -> tensor<8x12xf32>
    %o2 = mhlo.custom_call @pxla.shard_to_full(%s) {pxla.dims = [["x"], []]} : (tensor<4x3xf32>) -> tensor<8x3xf32>
    return %o1, %o2, %k : tensor<8x12xf32>, tensor<8x3xf32>, tensor<4x3xf32>
  }
}

// -----

// Partially manual (x only), an open dimension, and a second, unconnected
// region over both axes: two manual computations, global code between them.

// CHECK-LABEL: func.func public @two_regions
// CHECK-NEXT: %[[A:.*]] = sdy.manual_computation(%{{.*}}) in_shardings=[<@mesh, [{"x"}, {}, {?}]>] out_shardings=[<@mesh, [{"x"}, {}, {?}]>] manual_axes={"x"} (%{{.*}}: tensor<4x4x3xf32>)
// CHECK: sdy.return
// CHECK-NEXT: } : (tensor<8x4x3xf32>) -> tensor<8x4x3xf32>
// CHECK-NEXT: %[[G:.*]] = mhlo.add %[[A]], %{{.*}} : tensor<8x4x3xf32>
// CHECK-NEXT: sdy.manual_computation(%[[G]]) in_shardings=[<@mesh, [{"y"}, {}, {}]>] out_shardings=[<@mesh, [{"y"}, {}, {}]>] manual_axes={"x", "y"} (%{{.*}}: tensor<2x4x3xf32>)
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @two_regions(%x: tensor<8x4x3xf32>) -> tensor<8x4x3xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"], [], "?"], pxla.manual_axes = ["x"]} : (tensor<8x4x3xf32>) -> tensor<4x4x3xf32>
    %1 = mhlo.negate %0 : tensor<4x4x3xf32>
    %2 = mhlo.custom_call @pxla.shard_to_full(%1) {pxla.dims = [["x"], [], "?"], pxla.manual_axes = ["x"]} : (tensor<4x4x3xf32>) -> tensor<8x4x3xf32>
    %3 = mhlo.add %2, %x : tensor<8x4x3xf32>
    %4 = mhlo.custom_call @pxla.full_to_shard(%3) {pxla.dims = [["y"], [], []]} : (tensor<8x4x3xf32>) -> tensor<2x4x3xf32>
    %5 = mhlo.add %4, %4 : tensor<2x4x3xf32>
    %6 = mhlo.custom_call @pxla.shard_to_full(%5) {pxla.dims = [["y"], [], []]} : (tensor<2x4x3xf32>) -> tensor<8x4x3xf32>
    return %6 : tensor<8x4x3xf32>
  }
}

// -----

// A result computed from the device index alone: a region without operands.
// Manual axes follow the mesh order whatever order pxla.manual_axes lists.

// CHECK-LABEL: func.func public @no_operands
// CHECK-NEXT: sdy.manual_computation() in_shardings=[] out_shardings=[<@mesh, [{"x", "y"}]>] manual_axes={"x", "y"} () {
// CHECK-NEXT: mhlo.partition_id
// CHECK-NEXT: mhlo.reshape
// CHECK-NEXT: sdy.return
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @no_operands() -> tensor<8xui32> {
    %0 = mhlo.partition_id : tensor<ui32>
    %1 = mhlo.reshape %0 : (tensor<ui32>) -> tensor<1xui32>
    %2 = mhlo.custom_call @pxla.shard_to_full(%1) {pxla.dims = [["x", "y"]], pxla.manual_axes = ["y", "x"]} : (tensor<1xui32>) -> tensor<8xui32>
    return %2 : tensor<8xui32>
  }
}

// -----

// A mesh on the placeholders (not the module's) refers to its own symbol;
// per-device code inside another op's region (here a while loop) is found too.

// CHECK-LABEL: func.func public @own_mesh
// CHECK: sdy.manual_computation(%{{.*}}) in_shardings=[<@mesh_1, [{"x"}]>] out_shardings=[<@mesh_1, [{"x"}]>] manual_axes={"x", "y"}
// CHECK: mhlo.while
// CHECK: sdy.return
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=8"} {
  func.func public @own_mesh(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.mesh = "x=2,y=4", pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<4xf32>
    %1 = "mhlo.while"(%0) ({
    ^bb0(%a: tensor<4xf32>):
      %c = mhlo.constant dense<false> : tensor<i1>
      mhlo.return %c : tensor<i1>
    }, {
    ^bb0(%a: tensor<4xf32>):
      %n = mhlo.add %a, %0 : tensor<4xf32>
      mhlo.return %n : tensor<4xf32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %2 = mhlo.custom_call @pxla.shard_to_full(%1) {pxla.mesh = "x=2,y=4", pxla.dims = [["x"]]} : (tensor<4xf32>) -> tensor<8xf32>
    return %2 : tensor<8xf32>
  }
}

// -----

// Partially manual (a partitioned pmap body): data is manual, model splits the
// full weights and stays in the region's shardings, not in the tile's shape.

// CHECK-LABEL: func.func public @automatic_axis
// CHECK-NEXT: sdy.manual_computation(%{{.*}}, %{{.*}}) in_shardings=[<@mesh, [{"data"}, {}]>, <@mesh, [{}, {"model"}]>] out_shardings=[<@mesh, [{"data"}, {"model"}]>] manual_axes={"data"} (%{{.*}}: tensor<4x16xf32>, %{{.*}}: tensor<16x32xf32>) {
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "data=2,model=4"} {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func public @automatic_axis(%x: tensor<8x16xf32>, %w: tensor<16x32xf32>) -> tensor<8x32xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["data"], []], pxla.manual_axes = ["data"]} : (tensor<8x16xf32>) -> tensor<4x16xf32>
    %1 = mhlo.custom_call @pxla.full_to_shard(%w) {pxla.dims = [[], ["model"]], pxla.manual_axes = ["data"]} : (tensor<16x32xf32>) -> tensor<16x32xf32>
    %2 = "mhlo.dot"(%0, %1) : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
    %3 = mhlo.custom_call @pxla.shard_to_full(%2) {pxla.dims = [["data"], ["model"]], pxla.manual_axes = ["data"]} : (tensor<4x32xf32>) -> tensor<8x32xf32>
    return %3 : tensor<8x32xf32>
  }
}
