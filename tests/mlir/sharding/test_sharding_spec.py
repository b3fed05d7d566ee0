"""ShardingSpec semantics of the 2022 reference, and its errors."""

import dataclasses

import numpy as np
import pytest

from pxla_mlir.mlir.sharding import (
    AbstractMesh,
    Chunked,
    NoSharding,
    Replicated,
    ShardedAxis,
    ShardingSpec,
    ShardingSpecError,
    Unstacked,
    hlo_sharding,
    pmap_sharding_spec,
    spec_to_indices,
)


def test_docstring_example_replication_is_the_inner_dimension():
    data = np.array([1, 2, 3, 4])
    spec = ShardingSpec([Chunked([4])], [ShardedAxis(0), Replicated(2)])
    assert spec.mesh_shape == (4, 2)
    assert [data[i].tolist() for i in spec_to_indices(data.shape, spec)] == [[1], [1], [2], [2], [3], [3], [4], [4]]
    outer = ShardingSpec([Chunked([4])], [Replicated(2), ShardedAxis(0)])
    assert [data[i].tolist() for i in spec_to_indices(data.shape, outer)] == [[1], [2], [3], [4]] * 2


def test_mapping_order_on_a_2x3_mesh():
    """{'x': 1, 'y': 1}: 'y' is minor, chunks go to devices in mesh order;
    {'y': 1, 'x': 1}: 'x' is minor, the mesh is transposed first."""
    mesh = AbstractMesh((2, 3), ("x", "y"))
    x = np.arange(12).reshape(1, 12)
    xy = mesh.sharding_spec(2, {"x": 1, "y": 1})
    yx = mesh.sharding_spec(2, {"y": 1, "x": 1})
    assert xy.sharding == (NoSharding(), Chunked([2, 3]))
    assert yx.sharding == (NoSharding(), Chunked([3, 2]))
    got_xy = [x[i].ravel().tolist() for i in spec_to_indices(x.shape, xy)]
    got_yx = [x[i].ravel().tolist() for i in spec_to_indices(x.shape, yx)]
    assert got_xy == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11]]
    # device (x=i, y=j) holds chunk j*2 + i
    assert got_yx == [[0, 1], [4, 5], [8, 9], [2, 3], [6, 7], [10, 11]]
    assert mesh.tile_shape((1, 12), {"x": 1, "y": 1}) == mesh.tile_shape((1, 12), {"y": 1, "x": 1}) == (1, 2)


def test_indices_is_an_object_array_over_the_mesh():
    spec = ShardingSpec([Unstacked(2), Chunked([3])], [ShardedAxis(1), ShardedAxis(0)])
    idx = spec.indices((2, 6))
    assert idx.shape == (3, 2) and idx.dtype == object
    assert idx[2, 1] == (1, slice(4, 6))
    assert spec.shard_shape((2, 6)) == (2,)


def test_unstacked_removes_the_dimension():
    x = np.arange(24).reshape(4, 3, 2)
    assert pmap_sharding_spec(nrep=4, axis_size=4, ndim=2, map_axis=1) == \
        ShardingSpec([NoSharding(), Unstacked(4), NoSharding()], [ShardedAxis(0)])
    spec = pmap_sharding_spec(nrep=8, axis_size=4, ndim=2, map_axis=0)
    assert spec == ShardingSpec([Unstacked(4), NoSharding(), NoSharding()], [ShardedAxis(0), Replicated(2)])
    pieces = [x[i] for i in spec_to_indices(x.shape, spec)]
    assert [p.shape for p in pieces] == [(3, 2)] * 8
    np.testing.assert_array_equal(pieces[2], x[1])
    broadcast = pmap_sharding_spec(nrep=4, axis_size=4, ndim=3, map_axis=None)
    assert broadcast.mesh_mapping == (Replicated(4),)
    assert all(np.array_equal(x[i], x) for i in spec_to_indices(x.shape, broadcast))


def test_immutable_hashable_readable_and_parseable():
    spec = ShardingSpec([Chunked([2, 2]), NoSharding(), Unstacked(3)],
                        [ShardedAxis(2), Replicated(2), ShardedAxis(0), ShardedAxis(1)])
    assert repr(spec) == ("ShardingSpec((Chunked([2, 2]), NoSharding(), Unstacked(3)), "
                          "(ShardedAxis(2), Replicated(2), ShardedAxis(0), ShardedAxis(1)))")
    assert ShardingSpec.parse(repr(spec)) == spec
    assert hash(spec) == hash(ShardingSpec.parse(repr(spec)))
    assert len({spec, ShardingSpec.parse(repr(spec))}) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.sharding = ()
    assert spec.mesh_shape == (3, 2, 2, 2)


@pytest.mark.parametrize("make, message", [
    (lambda: ShardingSpec([Chunked([2])], [ShardedAxis(0), ShardedAxis(0)]),
     "mesh_mapping uses sharded axis 0 more than once"),
    (lambda: ShardingSpec([Chunked([2, 2])], [ShardedAxis(0)]), "sharded axis 1 is never placed on the mesh"),
    (lambda: ShardingSpec([Chunked([2])], [ShardedAxis(1)]), "names sharded axis 1, but the sharding has 1"),
    (lambda: ShardingSpec([Chunked([0])], []), "a chunk count must be a positive integer, got 0"),
    (lambda: ShardingSpec([Unstacked(-1)], []), "an unstacked size must be a positive integer"),
    (lambda: ShardingSpec([Replicated(2)], []), "sharding entries must be NoSharding, Chunked or Unstacked"),
    (lambda: ShardingSpec([], [Chunked([2])]), "mesh_mapping entries must be ShardedAxis or Replicated"),
    (lambda: ShardingSpec([Chunked([4])], [ShardedAxis(0)]).indices((6,)),
     "dimension 0 of shape (6,) (size 6) does not split evenly into 4 chunks"),
    (lambda: ShardingSpec([Unstacked(4)], [ShardedAxis(0)]).indices((3,)),
     "dimension 0 of shape (3,) has size 3, but Unstacked(4) needs size 4"),
    (lambda: ShardingSpec([NoSharding()], []).indices((3, 3)), "describes 1 dimensions, but the array has shape (3, 3)"),
    (lambda: hlo_sharding.of_spec(ShardingSpec([Unstacked(4)], [ShardedAxis(0)])), "an HLO sharding cannot drop a dimension"),
    (lambda: ShardingSpec.parse("ShardingSpec((Chunked([2]),), (ShardedAxis(0),)) + 1"), "cannot parse sharding spec"),
    (lambda: ShardingSpec.parse("__import__('os')"), "cannot parse sharding spec"),
    (lambda: hlo_sharding.of_spec(ShardingSpec([Chunked([2])], [ShardedAxis(0), Replicated(2)]), {0: "manual"}),
     "mesh dimension 0 is not a Replicated dimension"),
])
def test_errors_name_the_offending_value(make, message):
    with pytest.raises(ShardingSpecError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
                       .replace("]", r"\]").replace("+", r"\+")):
        make()


def test_manual_special_axes():
    spec = ShardingSpec([Chunked([2]), NoSharding()], [ShardedAxis(0), Replicated(2), Replicated(2)])
    assert str(hlo_sharding.of_spec(spec, {1: "manual"})) == "{devices=[2,1,2,2]<=[8] last_tile_dims={manual, replicated}}"
    assert str(hlo_sharding.of_spec(spec, {2: "manual"})) == \
        "{devices=[2,1,2,2]<=[2,2,2]T(0,2,1) last_tile_dims={manual, replicated}}"
    assert str(hlo_sharding.of_spec(ShardingSpec([NoSharding()], [Replicated(8)]), {0: "manual"})) == "{manual}"
    assert str(hlo_sharding.of_spec(ShardingSpec([NoSharding()], [Replicated(8)]))) == "{replicated}"
