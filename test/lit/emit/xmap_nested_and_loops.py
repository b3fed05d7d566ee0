# RUN: %python %s | filecheck %s
# Replica lowering of (1) an xmap nested in an xmap, the inner one spreading
# 'j' over mesh axis y while the outer spreads 'i' over x: the inner operand
# is sliced at the device's y index, its psum groups the y devices, its result
# is gathered back over y; (2) a named axis on mesh axis x and a serial loop:
# the chunks run in a while loop, cut at the pmean over the looped axis.

import numpy as np
from jax import lax

import pxla_mlir
from pxla_mlir.testing import print_lowering


def inner(v):
    return v * lax.psum(v, "j")


def outer(u):
    return pxla_mlir.xmap(inner, ["j", ...], ["j", ...], axis_resources={"j": "y"})(u) + lax.axis_index("i")


def centered(v):
    return v * 2 - lax.pmean(v, "i")


# CHECK-LABEL: TEST: nested
# CHECK: mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32
# CHECK: func.func public @main(%{{.*}}: tensor<1x4x3xf32> {pxla.tile_dims = {{\[\[}}"x"], [], []]}) -> (tensor<1x4x3xf32> {pxla.tile_dims = {{\[\[}}"x"], [], []]})
# CHECK: mhlo.replica_id
# CHECK: "mhlo.dynamic_slice"({{.*}}) <{slice_sizes = dense<[1, 3]> : tensor<2xi64>}> : (tensor<4x3xf32>, tensor<i32>, tensor<i32>) -> tensor<1x3xf32>
# CHECK: "mhlo.all_reduce"({{.*}}) <{replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}>
# CHECK: "mhlo.all_gather"({{.*}}) <{all_gather_dim = 0 : i64, replica_groups = dense<{{\[\[}}0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}> : (tensor<1x3xf32>) -> tensor<4x3xf32>
with pxla_mlir.Mesh.create({"x": 2, "y": 4}):
    print_lowering("nested", pxla_mlir.xmap(outer, ["i", ...], ["i", ...], axis_resources={"i": "x"}),
                   np.zeros((2, 4, 3), np.float32))

# CHECK-LABEL: TEST: loop
# CHECK: mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32
# CHECK: func.func public @main(%{{.*}}: tensor<8x3xf32> {pxla.tile_dims = {{\[\[}}"x"], []]}) -> (tensor<8x3xf32> {pxla.tile_dims = {{\[\[}}"x"], []]})
# CHECK: mhlo.while
# CHECK: "mhlo.all_reduce"({{.*}}) <{replica_groups = dense<{{\[\[}}0, 1]]> : tensor<1x2xi64>}>
# CHECK: mhlo.while
with pxla_mlir.Mesh.create({"x": 2}), pxla_mlir.serial_loop("l", 4):
    print_lowering("loop", pxla_mlir.xmap(centered, ["i", ...], ["i", ...], axis_resources={"i": ("x", "l")}),
                   np.zeros((16, 3), np.float32))
