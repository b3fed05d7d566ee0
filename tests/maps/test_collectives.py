"""The collective table (jax layer) agrees with jax and with the MHLO table
the passes use."""

import pytest
from jax import lax

from pxla_mlir.jaxbridge.jax_internals import core
from pxla_mlir.maps.invariance import varying_outputs
from pxla_mlir.mlir.collectives import COLLECTIVES, axes_of
from pxla_mlir.mlir.core import device_groups as mhlo_collectives
from pxla_mlir.xmaps import rewrites


def _primitives():
    from jax._src import core as jax_core  # jax's own modules: every primitive they define
    from jax._src.lax import parallel as parallel_primitives

    found = {}
    for module in (parallel_primitives, jax_core):
        for value in vars(module).values():
            if isinstance(value, jax_core.Primitive):
                found[value.name] = value
    return found


@pytest.mark.parametrize("name", list(COLLECTIVES))
def test_entry_names_a_jax_primitive_and_known_mhlo_ops(name):
    entry = COLLECTIVES[name]
    assert name in _primitives(), f"{name} is not a jax primitive"
    assert entry.axes_param in ("axes", "axis_name")
    assert set(entry.mhlo) <= set(mhlo_collectives.MHLO_COLLECTIVES)


def test_xmap_rebinds_every_collective_of_the_table():
    """xmap's rule table and the collective table name the same primitives:
    each collective has a rule or is explicitly bound unchanged."""
    assert set(rewrites.RULES) | rewrites.UNCHANGED == set(COLLECTIVES)
    assert not set(rewrites.RULES) & rewrites.UNCHANGED
    assert all(callable(rule) for rule in rewrites.RULES.values())


def test_agreeing_collectives_make_outputs_invariant():
    def body(x):
        return lax.psum(x, "i"), lax.ppermute(x, "i", [(0, 1), (1, 0)]), lax.axis_index("i") + 0 * x, \
            lax.pmax(x, "i"), lax.psum(x, "i", axis_index_groups=[[0], [1]])

    with core.extend_axis_env_nd([("i", 2)]):
        import jax

        jaxpr = jax.make_jaxpr(body)(1.0)
    assert varying_outputs(jaxpr.jaxpr, [True], "i") == [False, True, True, False, True]
    assert [axes_of(e) for e in jaxpr.eqns if e.primitive.name in COLLECTIVES][:1] == [("i",)]
