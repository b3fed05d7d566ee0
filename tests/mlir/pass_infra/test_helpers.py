"""The public helpers for pass authors (``from pxla_mlir.passes import helpers``): read-only, both dialects."""

from jaxlib.mlir import ir

from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.passes import helpers

MODULE = """
module @m attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 2 : i32, pxla.mesh = "i=2,j=2"} {
  func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "mhlo.all_reduce"(%a) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>,
        replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = mhlo.add %x, %y : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %1 = "stablehlo.all_reduce"(%0) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %2 = "mhlo.collective_permute"(%1) <{channel_handle = #mhlo.channel_handle<handle = 2, type = 1>,
        source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<4xf32>) -> tensor<4xf32>
    %3 = func.call @helper(%2) : (tensor<4xf32>) -> tensor<4xf32>
    return %3 : tensor<4xf32>
  }
  func.func private @helper(%a: tensor<4xf32>) -> tensor<4xf32> {
    return %a : tensor<4xf32>
  }
}
"""


def test_the_helpers_read_both_dialects_and_change_nothing():
    with make_context():
        module = ir.Module.parse(MODULE)
        before = str(module)
        op = module.operation
        assert helpers.kind(helpers.walk(op)[0]) == "module"
        assert helpers.main_function(op) is not None and helpers.public_functions(op) == ["main"]
        assert helpers.device_counts(op) == (2, 2) and helpers.mesh_axes(op) == {"i": 2, "j": 2}
        found = helpers.collectives(op)
        assert [o.name for o in found] == ["mhlo.all_reduce", "stablehlo.all_reduce", "mhlo.collective_permute"]
        assert [helpers.group_mode(o) for o in found] == ["flattened-id", "cross-replica", "cross-partition"]
        assert helpers.device_groups(found[0], 2, 2) == [[0, 1], [2, 3]]
        assert helpers.device_groups(found[1], 2, 2) == [[0, 2], [1, 3]]  # replicas 0 and 1, in each partition
        assert helpers.device_groups(found[2], 2, 2) == [[0, 1], [1, 0], [2, 3], [3, 2]]  # in every replica
        assert helpers.id_rows(found[2], "source_target_pairs") == [[0, 1], [1, 0]]
        assert helpers.ops_of_kind(op, ("add",)) and all(helpers.kind(o) == "add"
                                                          for o in helpers.ops_of_kind(op, ("add",)))
        assert str(module) == before


def test_a_module_without_a_mesh_or_counts():
    with make_context():
        module = ir.Module.parse("func.func private @f() { return }")
        assert helpers.mesh_axes(module.operation) == {} and helpers.device_counts(module.operation) == (1, 1)
        assert helpers.main_function(module.operation) is None and helpers.public_functions(module.operation) == []
