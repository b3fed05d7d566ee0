"""A pmap with nested pmaps places the values that only enter inner pmaps,
and the results that only leave them, by piece (pxla-place-pieces at
import): XLA gets the program jax.jit(shard_map) over a mesh of all the
axes gives it, with no slices by device id and no all-gathers of its own,
and the results stay bit-identical to jax's."""

import re

import jax
import numpy as np
import pytest
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import pxla_mlir

FORMS = [("replica", "sdy"), ("partition", "sdy"), ("partition", "gspmd")]


def level3(z):
    return lax.psum(jax.numpy.sin(z), ("i", "j", "k")) + lax.axis_index("k")


def level2(y):
    return pxla_mlir.pmap(level3, "k")(y) + lax.psum(y, "j")


def level1(x):
    return pxla_mlir.pmap(level2, "j")(x) * 2


def as_shard_map(x):  # the same program, written for a 2x2x2 mesh
    return (level3(x) + lax.psum(x, "j")) * 2


def mesh():
    return Mesh(np.array(jax.devices()[:8]).reshape(2, 2, 2), ("i", "j", "k"))


def parameters(hlo: str) -> str:
    """The per-device parameter and result shapes of an optimized HLO module."""
    return re.search(r"entry_computation_layout=\{\((.*?)\)->(.*?)\}", hlo).group(0)


@pytest.mark.parametrize("mode, shardings", FORMS)
def test_three_levels_compile_to_jax_shard_map_program(mode, shardings):
    x = np.arange(2 * 2 * 2 * 16, dtype=np.float32).reshape(2, 2, 2, 16) / 7 - 9
    ours = pxla_mlir.pmap(level1, "i", mode=mode, shardings=shardings)
    theirs = jax.jit(jax.shard_map(as_shard_map, mesh=mesh(), in_specs=P("i", "j", "k"), out_specs=P("i", "j", "k")))
    lowered = ours.lower(x)
    mine, jax_hlo = lowered.compile().as_text(), theirs.lower(x).compile().as_text()
    assert parameters(mine) == parameters(jax_hlo)
    assert "f32[1,1,1,16]" in parameters(mine)
    for op in ("all-gather", "dynamic-slice", "all-to-all"):
        assert mine.count(f" {op}(") <= jax_hlo.count(f" {op}("), op
    assert mine.count(" all-reduce(") == jax_hlo.count(" all-reduce(") == 2
    spec = lowered.in_shardings[0]
    assert isinstance(spec, NamedSharding) and spec.spec == P("i", "j", "k")
    assert dict(spec.mesh.shape) == {"i": 2, "j": 2, "k": 2}
    got = ours(x)
    assert got.sharding.is_equivalent_to(theirs(x).sharding, x.ndim)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(theirs(x)))


def test_axes_none_and_collectives_inside_keep_what_cannot_move():
    """in_axes None and non-zero, out_axes non-zero, an all_gather and a
    reduction: what reaches the boundary goes by piece, what needs the whole
    value is still collected, and every value matches jax.vmap."""
    def inner(z, w):
        return z * w + lax.axis_index("j"), lax.all_gather(z, "i").sum(0)

    def outer(x, w):
        a, b = pxla_mlir.pmap(inner, "j", in_axes=(1, None), out_axes=(1, 0))(x, w)
        return a - 1, b.sum(0)

    def reference(x, w):
        a, b = jax.vmap(inner, in_axes=(1, None), out_axes=(1, 0), axis_name="j")(x, w)
        return a - 1, b.sum(0)

    # Values exact in float32, so the sums agree bit for bit whatever their order.
    x = np.random.default_rng(0).integers(-50, 50, size=(3, 2, 4, 5)).astype(np.float32)
    w = np.arange(5, dtype=np.float32) - 2.5
    f = pxla_mlir.pmap(outer, "i", in_axes=(1, None), out_axes=(2, 0))
    lowered = f.lower(x, w)
    assert lowered.in_shardings[0].spec == P(None, "i", "j")  # x: i at its in_axis, j at the inner in_axis
    assert lowered.out_shardings[0].spec == P(None, "j", "i")  # a: j at the inner out_axis, i at the outer one
    assert lowered.out_shardings[1].spec == P("i")  # b: summed over j inside
    got = f(x, w)
    want = jax.vmap(reference, in_axes=(1, None), out_axes=(2, 0), axis_name="i")(x, w)
    for g, v in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(v))


@pytest.mark.parametrize("outer", ["_pxla_rep1", "_pxla_rep2", "i"])
def test_an_outer_axis_named_like_a_made_up_mesh_axis_keeps_the_mesh_axes_apart(outer):
    """A size-2 inner pmap inside a 2 x 4 nest splits its argument over the
    major half of the inner devices only: the minor half gets a made-up mesh
    axis name, which must differ from the outer pmap's."""
    def program(pm):
        return pm(lambda y, w: (pm(lambda z: z + lax.axis_index("j"), axis_name="j")(y),
                                pm(lambda z: z * lax.axis_index("k") + lax.axis_index(outer), axis_name="k")(w)),
                  axis_name=outer)

    x = np.arange(2 * 4 * 6, dtype=np.int32).reshape(2, 4, 6)
    w = np.arange(2 * 2 * 6, dtype=np.int32).reshape(2, 2, 6)
    got = program(pxla_mlir.pmap)(x, w)
    for g, e in zip(got, program(jax.vmap)(x, w)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(e))
    names = list(got[0].sharding.mesh.shape)
    assert len(set(names)) == len(names) == 3 and names[0] == outer
