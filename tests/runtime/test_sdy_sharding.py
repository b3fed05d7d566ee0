"""Shardy is the oracle for our sdy text, as XLA is for the HLO strings
(test_sharding_xla_oracle.py). For the same specs on 1-d, 2-d and 3-d meshes:
(a) Shardy's parser reads ``sdy_sharding.of_spec(ShardingSpec)`` and its printer prints it
back unchanged; (b) Shardy's verifier accepts it on an argument of a module
with the mesh; (c) XLA, partitioning with Shardy, gives the parameter the
HLO sharding ``hlo_sharding.of_spec()`` names; (d) each device holds the piece
``spec_to_indices`` names."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
from jax.sharding import Mesh as JaxMesh, NamedSharding, PartitionSpec as P
from jaxlib.mlir import ir
from test_sharding_xla_oracle import CASES, M8, M24, M42, M222

from pxla_mlir.jaxbridge.jax_internals import xc
from pxla_mlir.mlir.sharding import (
    AbstractMesh,
    Chunked,
    NoSharding,
    Replicated,
    ShardedAxis,
    ShardingSpec,
    Unstacked,
    hlo_sharding,
    sdy_sharding,
    spec_to_indices,
)
from pxla_mlir.mlir.sharding.sdy_sharding import SdyDim, SdyMesh, SdySharding, manual_axes, per_value
from pxla_mlir.runtime.compile import compile_module

MESHES = {(8,): M8, (2, 4): M24, (4, 2): M42, (2, 2, 2): M222}


def names_of(spec: ShardingSpec):
    """The mesh's axis names where the case was built on one, else sdy_sharding.of_spec's defaults."""
    mesh = MESHES.get(spec.mesh_shape)
    return mesh.axis_names if mesh is not None else None


def module_text(sharding, shape, param: str, result: str) -> str:
    t = f"tensor<{'x'.join(map(str, shape))}xf32>"
    return f"""module @oracle attributes {{mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32}} {{
  {sharding.mesh.symbol()}
  func.func public @main(%a: {t} {{sdy.sharding = {param}}}) -> ({t} {{sdy.sharding = {result}}}) {{
    %0 = mhlo.add %a, %a : {t}
    return %0 : {t}
  }}
}}"""


@pytest.mark.parametrize("name", list(CASES))
def test_shardy_and_xla_agree_with_the_spec(name, ctx):
    spec, shape = CASES[name]
    sharding = sdy_sharding.of_spec(spec, names_of(spec))
    text = str(sharding)
    replicated = str(SdySharding(sharding.mesh, tuple(SdyDim() for _ in shape)))
    devices = jax.devices()[:8]
    with ctx:
        # (a) Shardy prints back exactly what we wrote, the mesh too.
        assert str(ir.Attribute.parse(text)) == text
        assert str(ir.Attribute.parse(str(sharding.mesh))) == str(sharding.mesh)
        # (b) the verifier accepts it on an argument (parsing verifies), and (c) XLA's Shardy gives the
        # parameter the HLO sharding hlo_sharding.of_spec() names.
        as_param = compile_module(ir.Module.parse(module_text(sharding, shape, text, replicated)), devices)
        as_result = compile_module(ir.Module.parse(module_text(sharding, shape, replicated, text)), devices)
    assert xc.HloSharding.from_proto(as_param.get_parameter_shardings()[0]) == \
        xc.HloSharding.from_string(str(hlo_sharding.of_spec(spec)))
    # (d) each device's piece of a real result is x[idx] for spec_to_indices.
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    rep = NamedSharding(JaxMesh(np.array(devices), ("d",)), P())
    [pieces] = as_result.execute_sharded([jax.device_put(x, rep)]).disassemble_into_single_device_arrays()
    expected = spec_to_indices(shape, spec)
    assert len(pieces) == len(expected) == 8
    for device, (piece, idx) in enumerate(zip(pieces, expected)):
        np.testing.assert_array_equal(np.asarray(piece), 2 * x[idx], err_msg=f"device {device}")


@pytest.mark.parametrize("name", [n for n, (spec, _) in CASES.items() if spec.mesh_shape in MESHES])
def test_mesh_mapping_and_spec_name_the_same_axes(name):
    """AbstractMesh.sdy_sharding (what the passes write for pxla.dims) and
    sdy_sharding.of_spec differ only in listing replicated axes."""
    spec, shape = CASES[name]
    mesh = MESHES[spec.mesh_shape]
    from_spec = sdy_sharding.of_spec(spec, mesh.axis_names)
    mapping = {a: d for d, dim in enumerate(from_spec.dims) for a in dim.axes}
    assert mesh.sharding_spec(len(shape), mapping) == spec
    from_mesh = sdy_sharding.of_mapping(mesh, len(shape), mapping)
    assert from_mesh.dims == from_spec.dims and from_mesh.replicated == ()
    assert set(from_spec.replicated) == set(mesh.axis_names) - set(mapping)


@pytest.mark.parametrize("sharding", [
    SdySharding(SdyMesh([("x", 2), ("y", 4)]), (SdyDim(("y", "x"), closed=False), SdyDim((), closed=False))),
    SdySharding(SdyMesh([("x", 2), ("y", 4)]), (SdyDim(), SdyDim()), ("y", "x")),  # printed in mesh order
    SdySharding(SdyMesh([("x", 8)]), (), mesh_name=None),  # inlined mesh, scalar
    SdySharding(SdyMesh([('a"b', 2), ("c\\d", 2), ("é", 2)]), (SdyDim(('a"b',)), SdyDim(("é",))), ("c\\d",)),
    SdySharding(SdyMesh([("x", 8)]), (SdyDim(("x",)),), mesh_name="my mesh"),
])
def test_other_forms_round_trip(sharding, ctx):
    with ctx:
        assert str(ir.Attribute.parse(str(sharding))) == str(sharding)
        assert str(ir.Attribute.parse(str(sharding.mesh))) == str(sharding.mesh)


def test_region_attributes_round_trip(ctx):
    mesh = SdyMesh([("x", 2), ("y", 4)])
    a = SdySharding(mesh, (SdyDim(("x",)), SdyDim(("y",))))
    b = SdySharding(mesh, ())
    with ctx:
        for text in (per_value([a, b]), per_value([]), manual_axes(["x", "y"])):
            assert str(ir.Attribute.parse(text)) == text


def test_text_of_the_readme_example():
    spec = ShardingSpec([Chunked([4])], [ShardedAxis(0), Replicated(2)])
    assert str(sdy_sharding.of_spec(spec, ("x", "r"))) == '#sdy.sharding<@mesh, [{"x"}], replicated={"r"}>'
    assert str(sdy_sharding.of_spec(spec)) == '#sdy.sharding<@mesh, [{"a0"}], replicated={"a1"}>'
    assert str(sdy_sharding.of_spec(spec, mesh_name=None)) == '#sdy.sharding<mesh<["a0"=4, "a1"=2]>, [{"a0"}], replicated={"a1"}>'
    mesh = AbstractMesh((2, 3), ("x", "y"))
    assert str(sdy_sharding.of_mapping(mesh, 2, {"y": 1, "x": 1}, open_dims=[0])) == '#sdy.sharding<@mesh, [{?}, {"y", "x"}]>'
    assert str(sdy_sharding.mesh_of(mesh).symbol()) == 'sdy.mesh @mesh = <["x"=2, "y"=3]>'


@pytest.mark.parametrize("make, message", [
    (lambda: sdy_sharding.of_spec(ShardingSpec([Unstacked(8)], [ShardedAxis(0)])), "a Shardy sharding cannot drop a dimension"),
    (lambda: sdy_sharding.of_spec(ShardingSpec([Chunked([8])], [ShardedAxis(0)]), ("x", "y")), "1 mesh dimensions but 2 axis"),
    (lambda: sdy_sharding.of_spec(ShardingSpec([Chunked([2]), NoSharding()], [ShardedAxis(0), Replicated(4)]), ("x", "x")),
     "repeat a name"),
    (lambda: sdy_sharding.of_mapping(AbstractMesh((2, 4), ("x", "y")), 2, {"x": 0}, open_dims=[0]), "dimension 0 cannot be open"),
    (lambda: SdySharding(SdyMesh([("x", 2)]), (SdyDim(("z",)),)), "mesh axis 'z' is not in the mesh"),
    (lambda: SdySharding(SdyMesh([("x", 2)]), (SdyDim(("x",)),), ("x",)), "mesh axis 'x' is used more than once"),
])
def test_errors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_shardy_rejects_what_its_verifier_forbids(ctx):
    """The text alone parses; Shardy's verifier catches a bad axis once the
    sharding sits on an argument next to its mesh (no process abort)."""
    mesh = SdyMesh([("x", 2), ("y", 4)])
    bad = '#sdy.sharding<@mesh, [{"x"}, {"x"}]>'
    t = "tensor<8x8xf32>"
    text = (f"module {{ {mesh.symbol()}\n func.func @main(%a: {t} {{sdy.sharding = {bad}}}) -> {t} "
            f"{{ return %a : {t} }} }}")
    with ctx:
        ir.Attribute.parse(bad)
        with pytest.raises(ir.MLIRError, match="duplicate axis ref"):
            ir.Module.parse(text)
