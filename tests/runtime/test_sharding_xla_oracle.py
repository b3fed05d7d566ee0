"""XLA is the oracle for our sharding strings: for specs on 1-d, 2-d and 3-d
meshes, XLA (a) accepts the string and prints it back unchanged, (b) reports
the same tiling for a parameter, and (c) leaves on each device exactly the
piece ``spec_to_indices`` names."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
from jax.sharding import Mesh as JaxMesh, NamedSharding, PartitionSpec as P
from jaxlib.mlir import ir

from pxla_mlir.jaxbridge.jax_internals import xc
from pxla_mlir.mlir.sharding import (
    AbstractMesh,
    Chunked,
    NoSharding,
    Replicated,
    ShardedAxis,
    ShardingSpec,
    hlo_sharding,
    parse_hlo_sharding,
    spec_to_indices,
)
from pxla_mlir.runtime.compile import compile_module

M8, M24, M42, M222 = (AbstractMesh((8,), ("i",)), AbstractMesh((2, 4), ("x", "y")),
                      AbstractMesh((4, 2), ("x", "y")), AbstractMesh((2, 2, 2), ("a", "b", "c")))

CASES = {
    "1d-split": (M8.sharding_spec(2, {"i": 0}), (16, 3)),
    "1d-replicated": (M8.sharding_spec(2, {}), (4, 3)),
    "1d-partial-replication-inner": (ShardingSpec([Chunked([4]), NoSharding()], [ShardedAxis(0), Replicated(2)]), (8, 2)),
    "1d-partial-replication-outer": (ShardingSpec([Chunked([4]), NoSharding()], [Replicated(2), ShardedAxis(0)]), (8, 2)),
    "2d-both-dims": (M24.sharding_spec(2, {"x": 0, "y": 1}), (4, 8)),
    "2d-transposed": (M24.sharding_spec(2, {"y": 0, "x": 1}), (8, 4)),
    "2d-two-axes-one-dim": (M24.sharding_spec(2, {"x": 1, "y": 1}), (3, 16)),
    "2d-two-axes-one-dim-minor-x": (M24.sharding_spec(2, {"y": 1, "x": 1}), (3, 16)),
    "2d-partial-replication": (M24.sharding_spec(3, {"x": 2}), (2, 3, 4)),
    "2d-partial-replication-y": (M42.sharding_spec(2, {"y": 0}), (4, 4)),
    "3d-all": (M222.sharding_spec(3, {"a": 0, "b": 1, "c": 2}), (2, 4, 6)),
    "3d-permuted": (M222.sharding_spec(3, {"c": 0, "a": 1, "b": 2}), (2, 4, 6)),
    "3d-two-on-one-replicate-one": (M222.sharding_spec(2, {"c": 0, "a": 0}), (8, 2)),
    "3d-middle-replicated": (M222.sharding_spec(2, {"a": 1, "c": 0}), (4, 4)),
}


def _module(shape, param_sharding: str, result_sharding: str) -> str:
    t = f"tensor<{'x'.join(map(str, shape))}xf32>"
    return f"""module @oracle attributes {{mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32}} {{
  func.func public @main(%a: {t} {{mhlo.sharding = "{param_sharding}"}}) -> ({t} {{mhlo.sharding = "{result_sharding}"}}) {{
    %0 = mhlo.add %a, %a : {t}
    return %0 : {t}
  }}
}}"""


@pytest.mark.parametrize("name", list(CASES))
def test_xla_agrees_with_the_spec(name, ctx):
    spec, shape = CASES[name]
    text = str(hlo_sharding.of_spec(spec))
    # (a) XLA parses the string and prints it back unchanged: it is canonical.
    assert str(xc.HloSharding.from_string(text)) == text
    devices = jax.devices()[:8]
    with ctx:
        as_param = compile_module(ir.Module.parse(_module(shape, text, "{replicated}")), devices)
        as_result = compile_module(ir.Module.parse(_module(shape, "{replicated}", text)), devices)
    # (b) the compiled parameter has the same tiling.
    assert xc.HloSharding.from_proto(as_param.get_parameter_shardings()[0]) == xc.HloSharding.from_string(text)
    # (c) each device's piece of a real result is x[idx] for spec_to_indices.
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    rep = NamedSharding(JaxMesh(np.array(devices), ("d",)), P())
    [pieces] = as_result.execute_sharded([jax.device_put(x, rep)]).disassemble_into_single_device_arrays()
    expected = spec_to_indices(shape, spec)
    assert len(pieces) == len(expected) == 8
    for device, (piece, idx) in enumerate(zip(pieces, expected)):
        np.testing.assert_array_equal(np.asarray(piece), 2 * x[idx], err_msg=f"device {device}")
    # Our own reading of the string names the same pieces.
    ours = parse_hlo_sharding(text).shard_indices(shape, 8)
    assert [_bounds(i, shape) for i in ours] == [_bounds(i, shape) for i in expected]


def _bounds(index, shape):
    return tuple(s.indices(n)[:2] for s, n in zip(index, shape))


@pytest.mark.parametrize("text", [
    "{manual}",
    "{devices=[1,1,2,4]<=[8] last_tile_dims={manual, replicated}}",
    "{devices=[2,1,4]<=[8] last_tile_dims={manual}}",
    "{maximal device=3}",
    "{devices=[4,2]<=[2,4]T(1,0)}",
])
def test_special_strings_are_canonical(text):
    assert str(xc.HloSharding.from_string(text)) == text
    assert str(parse_hlo_sharding(text)) == text


@pytest.mark.parametrize("bad", ["{devices=[2,4]0,1,2}", "{tiled}", "{devices=[2]<=[3]}", "devices=[2]0,1"])
def test_unparseable_strings(bad):
    with pytest.raises(ValueError, match="HLO sharding"):
        parse_hlo_sharding(bad)
