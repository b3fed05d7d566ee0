# RUN: %python %s | filecheck %s
# pmap(i=2) over pmap(j=4): one module over 8 devices; the inner pmap's
# shard is a dynamic_slice at (device / 1) % 4, its unshard (out_axes=1) an
# all_gather over the groups of j, collectives over i, j and (i, j) get the
# right replica groups. The reversals keep the placeholders inside the
# module (a shard cannot move above a reversal, nor an unshard below one);
# the last test shows the same pmaps with values placed by piece instead.

import numpy as np
from jax import lax

import pxla_mlir
from pxla_mlir.testing import print_lowering


def inner(y):
    return lax.psum(y, "j"), lax.psum(y, "i"), lax.psum(y, ("i", "j"))


def outer(x):
    a, b, c = pxla_mlir.pmap(inner, "j", in_axes=1, out_axes=(1, 0, 0))(lax.rev(x, (0,)))
    return lax.rev(a, (0,)), lax.rev(b, (0,)), lax.rev(c, (0,))


def by_piece(x):
    return pxla_mlir.pmap(inner, "j", in_axes=1, out_axes=(1, 0, 0))(x)


x = np.zeros((2, 3, 4), np.float32)

# CHECK-LABEL: TEST: pxla_form
# CHECK: pxla.mesh = "i=2,_pxla_rep=4"
# CHECK: stablehlo.custom_call @pxla.shard({{.*}}pxla.axis = 1 : i64, pxla.axis_name = "j", pxla.axis_size = 4 : i64, pxla.stride = 1 : i64} : (tensor<3x4xf32>) -> tensor<3xf32>
# CHECK: stablehlo.custom_call @pxla.unshard({{.*}}pxla.axis = 1 : i64{{.*}} : (tensor<3xf32>) -> tensor<3x4xf32>
print_lowering("pxla_form", pxla_mlir.pmap(outer, "i"), x, stage="pxla")

# CHECK-LABEL: TEST: replica_all_gather
# CHECK: mhlo.num_replicas = 8
# The inner axis j: size 4, stride 1, so the index is replica_id % 4.
# CHECK: %[[ZERO:.*]] = mhlo.constant dense<0> : tensor<i32>
# CHECK: %[[FOUR:.*]] = mhlo.constant dense<4> : tensor<ui32>
# CHECK: %[[ID:.*]] = mhlo.replica_id : tensor<ui32>
# CHECK-NOT: mhlo.divide
# CHECK: %[[R:.*]] = mhlo.remainder %[[ID]], %[[FOUR]] : tensor<ui32>
# CHECK: %[[I:.*]] = mhlo.convert %[[R]] : (tensor<ui32>) -> tensor<i32>
# CHECK: "mhlo.dynamic_slice"({{.*}}, %[[ZERO]], %[[I]]) <{slice_sizes = dense<[3, 1]> : tensor<2xi64>}>
# CHECK-DAG: replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>
# CHECK-DAG: replica_groups = dense<{{\[\[}}0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>
# CHECK-DAG: replica_groups = dense<{{\[\[}}0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>
# CHECK: "mhlo.all_gather"({{.*}}) <{all_gather_dim = 1 : i64, replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> : (tensor<3x1xf32>) -> tensor<3x4xf32>
print_lowering("replica_all_gather", pxla_mlir.pmap(outer, "i"), x)

# CHECK-LABEL: TEST: replica_all_reduce
# CHECK: mhlo.dynamic_update_slice {{.*}} : (tensor<3x4xi32>, tensor<3x1xi32>, tensor<i32>, tensor<i32>) -> tensor<3x4xi32>
# CHECK-NOT: mhlo.all_gather
print_lowering("replica_all_reduce", pxla_mlir.pmap(outer, "i", unshard="all-reduce"), x)

# The argument only enters the inner pmap and the results only leave it: each
# device gets its own (i, j) piece and returns its piece, without a slice by
# device id or a collective to assemble the results.
# CHECK-LABEL: TEST: by_piece
# CHECK: pxla.mesh = "i=2,j=4"
# CHECK: @main(%[[X:.*]]: tensor<1x3x1xf32> {pxla.tile_dims = {{\[\[}}"i"], [], ["j"]]})
# CHECK-SAME: -> (tensor<1x3x1xf32> {pxla.tile_dims = {{\[\[}}"i"], [], ["j"]]}, tensor<1x1x3xf32> {pxla.tile_dims = {{\[\[}}"i"], ["j"], []]}, tensor<1x1x3xf32> {pxla.tile_dims = {{\[\[}}"i"], ["j"], []]})
# CHECK-NOT: mhlo.dynamic_slice
# CHECK-NOT: mhlo.all_gather
# CHECK: return
print_lowering("by_piece", pxla_mlir.pmap(by_piece, "i"), x)
