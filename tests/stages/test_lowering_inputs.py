"""What decides a lowering has one owner: each map kind's frozen inputs value. The lowering cache's key is a
digest of every field of it (change any field and the key changes), the module is built from it alone, and
where a field decides the module, a changed field gives another one, never a cached lowering of the old."""

import dataclasses

import jax
import numpy as np
import pytest
from jax import lax
from jax.sharding import PartitionSpec

import pxla_mlir
from pxla_mlir.mlir.pipelines import PmapPipeline, XmapPipeline
from pxla_mlir.mlir.support.stats import STATS
from pxla_mlir.pmaps import lower as pmap_lower
from pxla_mlir.pmaps.partition_strategy import Partitioning
from pxla_mlir.stages import lowering_cache, map_lowering
from pxla_mlir.xmaps import lower as xmap_lower

X = np.arange(32, dtype=np.float32).reshape(8, 4)


def captured(monkeypatch, module, lower):
    """The inputs value ``lower()`` hands to lower_cached (the real lowering still runs)."""
    seen = []

    def spy(inputs, **kwargs):
        seen.append((inputs, kwargs))
        return map_lowering.lower_cached(inputs, **kwargs)

    monkeypatch.setattr(module, "lower_cached", spy)
    lower()
    monkeypatch.undo()
    return seen[-1]


def _other(inputs, field: str):
    """A value of ``field`` other than ``inputs``' own, of the field's type."""
    value = getattr(inputs, field)
    others = {
        "kind": "jit",
        "jaxpr": jax.make_jaxpr(lambda x: x * 3)(X[0]),
        "params": dataclasses.replace(value, options=PmapPipeline(mode="partition")) if field == "params" else None,
        "global_avals": (jax.core.ShapedArray((8, 5), np.float32),),
        "in_specs": (PartitionSpec("model"),),
        "out_specs": (PartitionSpec("model"),),
        "devices": tuple(reversed(value)) if field == "devices" else None,
        "partitioning": Partitioning((("model", 2),)),
        "nested": 2,
        "by_piece": not value if isinstance(value, bool) else None,
        "pipeline": XmapPipeline(lowering="manual"),
        "tiles": True,
    }
    if field == "call":
        return dataclasses.replace(value, name="renamed")
    assert others.get(field) is not None, f"no other value for field {field!r}: add one to this test"
    return others[field]


def _fields_change_the_key(inputs):
    base = lowering_cache.key(inputs)
    assert base is not None
    for field in dataclasses.fields(inputs):
        other = dataclasses.replace(inputs, **{field.name: _other(inputs, field.name)})
        if other.cacheable:
            assert lowering_cache.key(other) not in (None, base), field.name
        else:
            assert not other.cacheable  # not kept: every lowering is its own


def test_every_field_of_a_pmaps_inputs_enters_the_key(monkeypatch):
    inputs, _ = captured(monkeypatch, pmap_lower,
                         lambda: pxla_mlir.pmap(lambda x: lax.psum(x, "i") * 2, "i").lower(X))
    assert isinstance(inputs, pmap_lower.PmapInputs)
    _fields_change_the_key(inputs)


def test_every_field_of_an_xmaps_inputs_enters_the_key(monkeypatch):
    mesh = pxla_mlir.Mesh.create({"x": 8})
    f = pxla_mlir.xmap(lambda x: lax.psum(x, "i") * 2, in_axes=["i", ...], out_axes=["i", ...],
                       axis_resources={"i": "x"})
    with mesh:
        inputs, _ = captured(monkeypatch, xmap_lower, lambda: f.lower(X))
    assert isinstance(inputs, xmap_lower.XmapInputs)
    _fields_change_the_key(inputs)


@pytest.mark.parametrize("field", ["jaxpr", "params", "devices"])
def test_a_field_that_decides_the_module_gives_another_lowering(monkeypatch, field):
    """Not a cached lowering of the old value: another module, or the same module on other devices."""
    lowering_cache.clear()
    inputs, kwargs = captured(monkeypatch, pmap_lower,
                              lambda: pxla_mlir.pmap(lambda x: lax.psum(x, "i") * 2, "i").lower(X))
    first = map_lowering.lower_cached(inputs, **kwargs)
    other = dataclasses.replace(inputs, **{field: _other(inputs, field)})
    if field == "jaxpr":
        other = dataclasses.replace(other, global_avals=inputs.global_avals)
    before = STATS["lowerings"]
    second = map_lowering.lower_cached(other, **kwargs)
    assert STATS["lowerings"] == before + 1  # lowered, not found
    assert (first.as_text(), first._lowering.layout.devices) != (second.as_text(), second._lowering.layout.devices)
