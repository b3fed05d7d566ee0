# RUN: %python %s | filecheck %s
# pxla_mlir.jit: ONE replica-mode module for a function holding pmaps. Code
# outside the pmaps runs replicated on all devices; each pmap shards its
# inputs and unshards its outputs inside the module.

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import pxla_mlir
from pxla_mlir.testing import print_lowering


def inner(y):
    return jnp.tanh(y) * lax.psum(y, "j")


def outer(x):
    return pxla_mlir.pmap(inner, "j", in_axes=1, out_axes=0)(x) + lax.psum(x, "i")[None, :, 0]


def step(x, w):
    return jnp.cos(w) * pxla_mlir.pmap(outer, "i")(x)


x = np.zeros((2, 3, 4), np.float32)

# Nested pmap i=2 (stride 4) over j=4 (stride 1) inside a jit axis of size 1.
# CHECK-LABEL: TEST: nested_pxla_form
# CHECK: module @jit_step
# CHECK: mhlo.num_partitions = 8
# CHECK: %[[COS:.*]] = stablehlo.cosine %arg1 : tensor<f32>
# CHECK: %[[SI:.*]] = stablehlo.custom_call @pxla.shard(%arg0) {{.*}}pxla.axis = 0 : i64, pxla.axis_name = "i", pxla.axis_size = 2 : i64, pxla.stride = 4 : i64}
# CHECK: stablehlo.custom_call @pxla.shard(%[[SI]]) {{.*}}pxla.axis = 1 : i64, pxla.axis_name = "j", pxla.axis_size = 4 : i64, pxla.stride = 1 : i64}
# CHECK: stablehlo.custom_call @pxla.unshard({{.*}}pxla.axis_name = "j"{{.*}} : (tensor<3xf32>) -> tensor<4x3xf32>
# CHECK: %[[UI:.*]] = stablehlo.custom_call @pxla.unshard({{.*}}pxla.axis_name = "i"{{.*}} : (tensor<4x3xf32>) -> tensor<2x4x3xf32>
# CHECK: stablehlo.multiply {{.*}}, %[[UI]] : tensor<2x4x3xf32>
print_lowering("nested_pxla_form", pxla_mlir.jit(step), x, np.float32(1), stage="pxla")

# Replicated inputs and outer code; the shards are dynamic slices at the
# device's index on each axis, the unshards all-gathers over each axis's groups.
# CHECK-LABEL: TEST: nested_final
# CHECK: mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32
# CHECK: @main(%arg0: tensor<2x3x4xf32> {mhlo.is_same_data_across_replicas = true, pxla.tile_dims = {{\[\[}}], [], []]}, %arg1: tensor<f32> {mhlo.is_same_data_across_replicas = true, pxla.tile_dims = []}) -> (tensor<2x4x3xf32> {pxla.tile_dims = {{\[\[}}], [], []]})
# The outer index is (replica_id / 4) % 2 (stride 4, size 2), the inner replica_id % 4.
# CHECK: %[[ZERO:.*]] = mhlo.constant dense<0> : tensor<i32>
# CHECK: %[[TWO:.*]] = mhlo.constant dense<2> : tensor<ui32>
# CHECK: %[[FOUR:.*]] = mhlo.constant dense<4> : tensor<ui32>
# CHECK: %[[COS:.*]] = mhlo.cosine %arg1
# CHECK: %[[ID:.*]] = mhlo.replica_id
# CHECK: %[[DIV:.*]] = mhlo.divide %[[ID]], %[[FOUR]] : tensor<ui32>
# CHECK: %[[OUTER:.*]] = mhlo.remainder %[[DIV]], %[[TWO]] : tensor<ui32>
# CHECK: %[[OI:.*]] = mhlo.convert %[[OUTER]] : (tensor<ui32>) -> tensor<i32>
# CHECK: %[[ROW:.*]] = "mhlo.dynamic_slice"(%arg0, %[[OI]], %[[ZERO]], %[[ZERO]]) <{slice_sizes = dense<[1, 3, 4]> : tensor<3xi64>}>
# CHECK: %[[BLOCK:.*]] = mhlo.reshape %[[ROW]]
# CHECK: %[[INNER:.*]] = mhlo.remainder %[[ID]], %[[FOUR]] : tensor<ui32>
# CHECK: %[[II:.*]] = mhlo.convert %[[INNER]] : (tensor<ui32>) -> tensor<i32>
# CHECK: "mhlo.dynamic_slice"(%[[BLOCK]], %[[ZERO]], %[[II]]) <{slice_sizes = dense<[3, 1]> : tensor<2xi64>}>
# CHECK: "mhlo.all_reduce"({{.*}}) <{replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}>
# CHECK: "mhlo.all_gather"({{.*}}) <{all_gather_dim = 0 : i64, replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> : (tensor<1x3xf32>) -> tensor<4x3xf32>
# CHECK: "mhlo.all_reduce"({{.*}}) <{replica_groups = dense<{{\[\[}}0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>}>
# CHECK: %[[G:.*]] = "mhlo.all_gather"({{.*}}) <{all_gather_dim = 0 : i64, replica_groups = dense<{{\[\[}}0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>}> : (tensor<1x4x3xf32>) -> tensor<2x4x3xf32>
# CHECK: %[[B:.*]] = "mhlo.broadcast_in_dim"(%[[COS]])
# CHECK: mhlo.multiply %[[B]], %[[G]] : tensor<2x4x3xf32>
print_lowering("nested_final", pxla_mlir.jit(step), x, np.float32(1))


def loss(w, x):
    return jnp.sum(pxla_mlir.pmap(lambda w, x: jnp.sum(jnp.tanh(x @ w)), "i", in_axes=(None, 0))(w, x))


# A training step: the forward pmap's residuals enter the backward pmap
# without a round trip through all-gather (pxla-fold-shard-of-unshard), and
# the cotangent of the broadcast w is one all-reduce.
# CHECK-LABEL: TEST: grad_step
# CHECK: %[[X:.*]] = mhlo.reshape {{.*}} : (tensor<1x3x4xf32>) -> tensor<3x4xf32>
# CHECK: %[[T:.*]] = mhlo.tanh
# CHECK-NOT: "mhlo.dynamic_slice"
# CHECK: "mhlo.dot_general"({{.*}}, %[[X]])
# CHECK: %[[CT:.*]] = "mhlo.all_reduce"({{.*}}) <{replica_groups = dense<{{\[\[}}0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}>
# CHECK: %[[U:.*]] = mhlo.multiply %[[CT]]
# CHECK: mhlo.subtract %arg0, %[[U]]
print_lowering("grad_step", pxla_mlir.jit(lambda w, x: w - 0.1 * jax.grad(loss)(w, x)),
               np.zeros((4, 2), np.float32), np.zeros((8, 3, 4), np.float32))
