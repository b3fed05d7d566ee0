// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-place-pieces)' | filecheck %s

// The docstring's example: the argument only enters the inner pmap, the
// unshard moves below the elementwise multiply to the result, so both are
// placed by piece and the mesh names the inner axis.

// CHECK-LABEL: module attributes
// CHECK-SAME: pxla.mesh = "i=2,j=2"
// CHECK: func.func public @main(%[[X:.*]]: tensor<1x1x8xf32> {pxla.tile_dims = {{\[\[}}"i"], ["j"], []]})
// CHECK-SAME: -> (tensor<1x1x8xf32> {pxla.tile_dims = {{\[\[}}"i"], ["j"], []]})
// CHECK-NEXT: %[[P:.*]] = stablehlo.reshape %[[X]] : (tensor<1x1x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[S:.*]] = stablehlo.sine %[[P]] : tensor<8xf32>
// CHECK-NEXT: %[[M:.*]] = stablehlo.multiply %[[S]], %[[S]] : tensor<8xf32>
// CHECK-NEXT: %[[R:.*]] = stablehlo.reshape %[[M]] : (tensor<8xf32>) -> tensor<1x1x8xf32>
// CHECK-NEXT: return %[[R]]
module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=2,_pxla_rep=2"} {
  func.func public @main(%arg0: tensor<1x2x8xf32> {pxla.tile_dims = [["i"], [], []]}) -> (tensor<1x2x8xf32> {pxla.tile_dims = [["i"], [], []]}) {
    %0 = stablehlo.reshape %arg0 : (tensor<1x2x8xf32>) -> tensor<2x8xf32>
    %1 = stablehlo.custom_call @pxla.shard(%0) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2x8xf32>) -> tensor<8xf32>
    %2 = stablehlo.sine %1 : tensor<8xf32>
    %3 = stablehlo.custom_call @pxla.unshard(%2) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<8xf32>) -> tensor<2x8xf32>
    %4 = stablehlo.multiply %3, %3 : tensor<2x8xf32>
    %5 = stablehlo.reshape %4 : (tensor<2x8xf32>) -> tensor<1x2x8xf32>
    return %5 : tensor<1x2x8xf32>
  }
}

// -----

// Three levels (i, j, k over 2x2x2), as in jax.jit(shard_map) over a 3-axis
// mesh: the outer body's psum over j of the j-level value moves into the k
// level (its groups lie in one k index), the unshard over k moves below the
// add, the scalar broadcast of the constant is made at the piece's shape.

// CHECK-LABEL: module attributes
// CHECK-SAME: pxla.mesh = "i=2,j=2,k=2"
// CHECK: func.func public @main(%[[X:.*]]: tensor<1x1x1x4xf32> {pxla.tile_dims = {{\[\[}}"i"], ["j"], ["k"], []]})
// CHECK-SAME: -> (tensor<1x1x1x4xf32> {pxla.tile_dims = {{\[\[}}"i"], ["j"], ["k"], []]})
// CHECK-NOT: pxla.shard
// CHECK-NOT: pxla.unshard
// CHECK: %[[P:.*]] = mhlo.reshape %[[X]] : (tensor<1x1x1x4xf32>) -> tensor<4xf32>
// CHECK: %[[S:.*]] = "mhlo.all_reduce"(%[[P]])
// CHECK: replica_groups = dense<{{\[\[}}0, 2], [1, 3], [4, 6], [5, 7]]>
// CHECK: %[[A:.*]] = mhlo.add %[[P]], %[[S]] : tensor<4xf32>
// CHECK: %[[B:.*]] = "mhlo.broadcast_in_dim"(%{{.*}}) <{broadcast_dimensions = dense<> : tensor<0xi64>}> : (tensor<f32>) -> tensor<4xf32>
// CHECK: %[[M:.*]] = mhlo.multiply %[[A]], %[[B]] : tensor<4xf32>
// CHECK: %[[R:.*]] = mhlo.reshape %[[M]] : (tensor<4xf32>) -> tensor<1x1x1x4xf32>
// CHECK: return %[[R]]
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=2,_pxla_rep=4"} {
  func.func public @main(%arg0: tensor<1x2x2x4xf32> {pxla.tile_dims = [["i"], [], [], []]}) -> (tensor<1x2x2x4xf32> {pxla.tile_dims = [["i"], [], [], []]}) {
    %0 = mhlo.reshape %arg0 : (tensor<1x2x2x4xf32>) -> tensor<2x2x4xf32>
    %1 = mhlo.custom_call @pxla.shard(%0) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 2 : i64} : (tensor<2x2x4xf32>) -> tensor<2x4xf32>
    %2 = mhlo.custom_call @pxla.shard(%1) {pxla.axis = 0 : i64, pxla.axis_name = "k", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2x4xf32>) -> tensor<4xf32>
    %3 = mhlo.custom_call @pxla.unshard(%2) {pxla.axis = 0 : i64, pxla.axis_name = "k", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<4xf32>) -> tensor<2x4xf32>
    %4 = "mhlo.all_reduce"(%1) <{replica_groups = dense<[[0, 2], [1, 3], [4, 6], [5, 7]]> : tensor<4x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %5 = mhlo.add %3, %4 : tensor<2x4xf32>
    %6 = mhlo.custom_call @pxla.unshard(%5) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x2x4xf32>
    %c = mhlo.constant dense<2.0> : tensor<f32>
    %7 = "mhlo.broadcast_in_dim"(%c) <{broadcast_dimensions = dense<> : tensor<0xi64>}> : (tensor<f32>) -> tensor<2x2x4xf32>
    %8 = mhlo.multiply %6, %7 : tensor<2x2x4xf32>
    %9 = mhlo.reshape %8 : (tensor<2x2x4xf32>) -> tensor<1x2x2x4xf32>
    return %9 : tensor<1x2x2x4xf32>
  }
}

// -----

// What moves data between the inner devices keeps its placeholders: a
// reduction after an unshard, a collective whose groups span the inner axis,
// and an argument that is also used whole. Nothing reaches the boundary, so
// the mesh and the signature stay.

// CHECK-LABEL: module attributes
// CHECK-SAME: pxla.mesh = "i=2,_pxla_rep=2"
// CHECK: func.func public @main(%{{.*}}: tensor<1x2x8xf32> {pxla.tile_dims = {{\[\[}}"i"], [], []]})
// CHECK: mhlo.custom_call @pxla.shard
// CHECK: mhlo.custom_call @pxla.unshard
// CHECK: mhlo.reduce
// CHECK: mhlo.custom_call @pxla.unshard
// CHECK: "mhlo.all_reduce"(%{{.*}}) <{replica_groups = dense<{{\[\[}}0, 1, 2, 3]]>
// CHECK: return %{{.*}}, %{{.*}}, %arg0
module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=2,_pxla_rep=2"} {
  func.func public @main(%arg0: tensor<1x2x8xf32> {pxla.tile_dims = [["i"], [], []]}) -> (tensor<1x8xf32> {pxla.tile_dims = [["i"], []]}, tensor<1x2x8xf32> {pxla.tile_dims = [["i"], [], []]}, tensor<1x2x8xf32> {pxla.tile_dims = [["i"], [], []]}) {
    %0 = mhlo.reshape %arg0 : (tensor<1x2x8xf32>) -> tensor<2x8xf32>
    %1 = mhlo.custom_call @pxla.shard(%0) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2x8xf32>) -> tensor<8xf32>
    %2 = mhlo.custom_call @pxla.unshard(%1) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<8xf32>) -> tensor<2x8xf32>
    %z = mhlo.constant dense<0.0> : tensor<f32>
    %3 = mhlo.reduce(%2 init: %z) applies mhlo.add across dimensions = [0] : (tensor<2x8xf32>, tensor<f32>) -> tensor<8xf32>
    %4 = mhlo.reshape %3 : (tensor<8xf32>) -> tensor<1x8xf32>
    %5 = mhlo.custom_call @pxla.unshard(%1) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<8xf32>) -> tensor<2x8xf32>
    %6 = "mhlo.all_reduce"(%5) <{replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %7 = mhlo.reshape %6 : (tensor<2x8xf32>) -> tensor<1x2x8xf32>
    return %4, %7, %arg0 : tensor<1x8xf32>, tensor<1x2x8xf32>, tensor<1x2x8xf32>
  }
}

// -----

// An aliased donation whose argument now has another tile type than its
// result only donates its buffer; a flat pmap (no inner devices) is left
// alone.

// CHECK-LABEL: module attributes
// CHECK-SAME: pxla.mesh = "i=2,j=2"
// CHECK: @main(%{{.*}}: tensor<1x1xf32> {jax.buffer_donor = true, pxla.tile_dims = {{\[\[}}"i"], ["j"]]})
// CHECK-SAME: -> (tensor<1x2xf32> {pxla.tile_dims = {{\[\[}}"i"], []]})
module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=2,_pxla_rep=2"} {
  func.func public @main(%arg0: tensor<1x2xf32> {pxla.tile_dims = [["i"], []], tf.aliasing_output = 0 : i32}) -> (tensor<1x2xf32> {pxla.tile_dims = [["i"], []]}) {
    %0 = mhlo.reshape %arg0 : (tensor<1x2xf32>) -> tensor<2xf32>
    %1 = mhlo.custom_call @pxla.shard(%0) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2xf32>) -> tensor<f32>
    %2 = mhlo.custom_call @pxla.unshard(%1) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<f32>) -> tensor<2xf32>
    %z = mhlo.constant dense<0.0> : tensor<f32>
    %3 = mhlo.reduce(%2 init: %z) applies mhlo.add across dimensions = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
    %4 = "mhlo.broadcast_in_dim"(%3) <{broadcast_dimensions = dense<> : tensor<0xi64>}> : (tensor<f32>) -> tensor<2xf32>
    %5 = mhlo.reshape %4 : (tensor<2xf32>) -> tensor<1x2xf32>
    return %5 : tensor<1x2xf32>
  }
}

// -----

// CHECK-LABEL: module attributes
// CHECK-SAME: pxla.mesh = "i=8"
// CHECK: @main(%{{.*}}: tensor<1x3xf32>
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=8"} {
  func.func public @main(%arg0: tensor<1x3xf32> {pxla.tile_dims = [["i"], []]}) -> (tensor<1x3xf32> {pxla.tile_dims = [["i"], []]}) {
    return %arg0 : tensor<1x3xf32>
  }
}

// -----

// A value that goes in and straight out again: the result is the
// argument's piece.

// CHECK-LABEL: module attributes
// CHECK-SAME: pxla.mesh = "i=2,j=2"
// CHECK: @main(%[[X:.*]]: tensor<1x1x3xf32> {pxla.tile_dims = {{\[\[}}"i"], ["j"], []]})
// CHECK-NEXT: %[[P:.*]] = mhlo.reshape %[[X]] : (tensor<1x1x3xf32>) -> tensor<3xf32>
// CHECK-NEXT: %[[R:.*]] = mhlo.reshape %[[P]] : (tensor<3xf32>) -> tensor<1x3x1xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x3x1xf32>
module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=2,_pxla_rep=2"} {
  func.func public @main(%arg0: tensor<1x2x3xf32> {pxla.tile_dims = [["i"], [], []]}) -> (tensor<1x3x2xf32> {pxla.tile_dims = [["i"], [], []]}) {
    %0 = mhlo.reshape %arg0 : (tensor<1x2x3xf32>) -> tensor<2x3xf32>
    %1 = mhlo.custom_call @pxla.shard(%0) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
    %2 = mhlo.custom_call @pxla.unshard(%1) {pxla.axis = 1 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<3xf32>) -> tensor<3x2xf32>
    %3 = mhlo.reshape %2 : (tensor<3x2xf32>) -> tensor<1x3x2xf32>
    return %3 : tensor<1x3x2xf32>
  }
}

// -----

// Two unshards along the same axis meet in an add: the add works on both
// pieces and one unshard leaves it.

// CHECK-LABEL: module attributes
// CHECK-SAME: pxla.mesh = "i=2,j=2"
// CHECK: @main(%[[X:.*]]: tensor<1x1x3xf32> {{.*}}, %[[Y:.*]]: tensor<1x1x3xf32>
// CHECK-NEXT: %[[PY:.*]] = mhlo.reshape %[[Y]]
// CHECK-NEXT: %[[PX:.*]] = mhlo.reshape %[[X]]
// CHECK-NEXT: %[[N:.*]] = mhlo.negate %[[PX]]
// CHECK-NEXT: %[[A:.*]] = mhlo.add %[[N]], %[[PY]] : tensor<3xf32>
// CHECK-NEXT: %[[R:.*]] = mhlo.reshape %[[A]] : (tensor<3xf32>) -> tensor<1x1x3xf32>
// CHECK-NEXT: return %[[R]]
module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=2,_pxla_rep=2"} {
  func.func public @main(%arg0: tensor<1x2x3xf32> {pxla.tile_dims = [["i"], [], []]}, %arg1: tensor<1x2x3xf32> {pxla.tile_dims = [["i"], [], []]}) -> (tensor<1x2x3xf32> {pxla.tile_dims = [["i"], [], []]}) {
    %0 = mhlo.reshape %arg0 : (tensor<1x2x3xf32>) -> tensor<2x3xf32>
    %1 = mhlo.custom_call @pxla.shard(%0) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
    %2 = mhlo.negate %1 : tensor<3xf32>
    %3 = mhlo.custom_call @pxla.unshard(%2) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<3xf32>) -> tensor<2x3xf32>
    %4 = mhlo.reshape %arg1 : (tensor<1x2x3xf32>) -> tensor<2x3xf32>
    %5 = mhlo.custom_call @pxla.shard(%4) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
    %6 = mhlo.custom_call @pxla.unshard(%5) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<3xf32>) -> tensor<2x3xf32>
    %7 = mhlo.add %3, %6 : tensor<2x3xf32>
    %8 = mhlo.reshape %7 : (tensor<2x3xf32>) -> tensor<1x2x3xf32>
    return %8 : tensor<1x2x3xf32>
  }
}

// -----

// The outer pmap's axis is called _pxla_rep1: the mesh axis made for the
// inner devices no piece names (the minor half of a stride-2 piece) gets a
// name no other axis has.

// CHECK-LABEL: module attributes
// CHECK-SAME: pxla.mesh = "_pxla_rep1=2,k=2,_pxla_rep2=2"
// CHECK: @main(%{{.*}}: tensor<1x1x3xf32> {pxla.tile_dims = {{\[\[}}"_pxla_rep1"], ["k"], []]})
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "_pxla_rep1=2,_pxla_rep=4"} {
  func.func public @main(%arg0: tensor<1x2x3xf32> {pxla.tile_dims = [["_pxla_rep1"], [], []]}) -> (tensor<1x2x3xf32> {pxla.tile_dims = [["_pxla_rep1"], [], []]}) {
    %0 = mhlo.reshape %arg0 : (tensor<1x2x3xf32>) -> tensor<2x3xf32>
    %1 = mhlo.custom_call @pxla.shard(%0) {pxla.axis = 0 : i64, pxla.axis_name = "k", pxla.axis_size = 2 : i64, pxla.stride = 2 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
    %2 = mhlo.negate %1 : tensor<3xf32>
    %3 = mhlo.custom_call @pxla.unshard(%2) {pxla.axis = 0 : i64, pxla.axis_name = "k", pxla.axis_size = 2 : i64, pxla.stride = 2 : i64} : (tensor<3xf32>) -> tensor<2x3xf32>
    %4 = mhlo.reshape %3 : (tensor<2x3xf32>) -> tensor<1x2x3xf32>
    return %4 : tensor<1x2x3xf32>
  }
}
