"""Mesh and AbstractMesh: identity, context, processes, tiling, manual strings."""

import dataclasses
import threading

import numpy as np
import pytest

from pxla_mlir.mlir.sharding import (
    AbstractMesh,
    Mesh,
    MeshError,
    current_mesh,
    dims_from_mapping,
    hlo_sharding,
    mapping_from_dims,
)


@dataclasses.dataclass(frozen=True)
class FakeDevice:
    id: int
    process_index: int = 0


def fake_mesh(shape, names, process_of=lambda i: 0):
    n = int(np.prod(shape))
    return Mesh(np.array([FakeDevice(i, process_of(i)) for i in range(n)], dtype=object).reshape(shape), names)


def test_shape_size_ids_and_identity():
    m = fake_mesh((2, 4), ("x", "y"))
    assert list(m.shape.items()) == [("x", 2), ("y", 4)]
    assert m.size == 8 and m.device_ids.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert m == fake_mesh((2, 4), ("x", "y")) and hash(m) == hash(fake_mesh((2, 4), ("x", "y")))
    assert m != fake_mesh((2, 4), ("a", "y")) and m != fake_mesh((4, 2), ("x", "y"))
    assert m.abstract() == AbstractMesh((2, 4), ("x", "y"))
    assert repr(m) == "Mesh([[0, 1, 2, 3], [4, 5, 6, 7]], ('x', 'y'))"
    with pytest.raises(AttributeError):
        m.foo = 1


def test_equality_follows_device_order_and_only_the_empty_mesh_has_no_devices():
    devs = [FakeDevice(i) for i in range(4)]
    m = Mesh(np.array(devs, dtype=object), ("x",))
    flipped = Mesh(np.array(devs[::-1], dtype=object), ("x",))
    assert m != flipped and {m: 1}.get(Mesh(np.array(devs, dtype=object), ("x",))) == 1
    empty, one = Mesh(np.empty((), dtype=object), ()), Mesh(np.array(devs[0], dtype=object), ())
    assert empty.empty and empty.no_devices and empty == Mesh(np.empty((), dtype=object), ())
    assert not one.empty and not one.no_devices and one != empty and hash(one) != hash(empty)
    assert not m.empty and not m.no_devices
    with pytest.raises(AttributeError):
        m.no_devices = True
    with pytest.raises(ValueError):
        m.devices[0, 0] = None  # read-only


def test_context_manager_nests_per_thread():
    a, b = fake_mesh((8,), ("i",)), fake_mesh((2, 4), ("x", "y"))
    assert current_mesh() is None
    with a:
        assert current_mesh() is a
        with b:
            assert current_mesh() is b
            seen = []
            t = threading.Thread(target=lambda: seen.append(current_mesh()))
            t.start()
            t.join()
            assert seen == [None]  # thread-local
        assert current_mesh() is a
    assert current_mesh() is None


@pytest.mark.parametrize("make, message", [
    (lambda: fake_mesh((2, 4), ("x", "x")), "mesh axis name 'x' is used twice"),
    (lambda: fake_mesh((2, 4), ("x",)), "a 2-d device array needs 2 axis names"),
    (lambda: Mesh(np.array([FakeDevice(0), FakeDevice(0)], dtype=object), ("i",)), "device 0 appears more than once"),
    (lambda: AbstractMesh((0,), ("i",)), "mesh axis 'i' has size 0"),
    (lambda: Mesh.create({"x": 4, "y": 4}, devices=[FakeDevice(i) for i in range(8)]),
     "needs 16 devices, but only 8 exist"),
])
def test_mesh_errors(make, message):
    with pytest.raises(MeshError, match=message):
        make()


def test_create_uses_the_first_devices():
    devs = [FakeDevice(i) for i in range(8)]
    m = Mesh.create({"x": 2, "y": 2}, devices=devs)
    assert m.device_ids.tolist() == [[0, 1], [2, 3]]


def test_local_mesh_is_the_contiguous_subcube_of_a_process():
    m = fake_mesh((2, 4), ("x", "y"), process_of=lambda i: i // 4)  # rows per process
    assert m.local_mesh_of(1).device_ids.tolist() == [[4, 5, 6, 7]]
    cols = fake_mesh((2, 4), ("x", "y"), process_of=lambda i: (i % 4) // 2)  # 2x2 blocks
    assert cols.local_mesh_of(1).device_ids.tolist() == [[2, 3], [6, 7]]
    scattered = fake_mesh((2, 4), ("x", "y"), process_of=lambda i: i % 2)
    with pytest.raises(MeshError, match="devices of process 0 do not form a contiguous sub-cube"):
        scattered.local_mesh_of(0)


def test_tile_untile_and_errors():
    m = AbstractMesh((2, 4), ("x", "y"))
    assert m.tile_shape((8, 12), {"x": 0, "y": 1}) == (4, 3)
    assert m.tile_shape((16, 3), {"y": 0, "x": 0}) == (2, 3)
    assert m.untile_shape((2, 3), {"y": 0, "x": 0}) == (16, 3)
    with pytest.raises(MeshError, match=r"dimension 1 of the value \(shape \(8, 6\)\) has size 6, which mesh axes 'y'"):
        m.tile_shape((8, 6), {"y": 1})
    with pytest.raises(MeshError, match="mesh axis 'z' .* is not in the mesh; its axes are 'x', 'y'"):
        m.tile_shape((8,), {"z": 0})
    with pytest.raises(MeshError, match="mapped to dimension 2, but the value has 1 dimensions"):
        m.tile_shape((8,), {"x": 2})


def test_dims_mapping_round_trip():
    dims = [["x"], [], ["y", "z"]]
    assert mapping_from_dims(dims) == {"x": 0, "y": 2, "z": 2}
    assert dims_from_mapping(mapping_from_dims(dims), 3) == dims
    with pytest.raises(MeshError, match="mesh axis 'x' splits dimensions 0 and 1"):
        mapping_from_dims([["x"], ["x"]])


def test_manual_and_mesh_sharding_strings():
    m = AbstractMesh((2, 4), ("x", "y"))
    assert str(hlo_sharding.manual_tile(m, 2, {"x", "y"})) == "{manual}"
    assert str(hlo_sharding.manual_tile(m, 2, {"x"})) == "{devices=[1,1,2,4]<=[8] last_tile_dims={manual, replicated}}"
    assert str(hlo_sharding.manual_tile(m, 1, {"y"})) == "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dims={manual, replicated}}"
    assert str(hlo_sharding.of_mapping(m, 2, {"x": 0})) == "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"
    assert str(hlo_sharding.of_mapping(m, 2, {"x": 0}, manual_axes={"y"})) == "{devices=[2,1,4]<=[8] last_tile_dims={manual}}"
    with pytest.raises(MeshError, match="manual axis 'w' is not in the mesh"):
        hlo_sharding.manual_tile(m, 1, {"w"})
