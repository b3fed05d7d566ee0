"""Nested pmaps whose values are placed by piece (pxla-place-pieces), on the
inputs that broke it: each runs against the same program with jax.vmap,
integers exactly."""

import jax
import numpy as np
import pytest
from jax import lax

import pxla_mlir


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
