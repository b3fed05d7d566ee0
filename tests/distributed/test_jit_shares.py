"""The probe that finds which pxla_mlir.jit arguments are process-local shares
(pxla_mlir/distributed/jit_shares.py), in one process: a stand-in map
reports its operand as a real pmap or xmap does in a multi-process run. The
real maps, the global values and the launches are tested in
tests/distributed/test_multiprocess.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from pxla_mlir.distributed import jit_shares
from pxla_mlir.distributed.jit_shares import JitShareError, find_shares
from pxla_mlir.jaxbridge.jax_internals import api_util, core
from pxla_mlir.maps.tracing import trace_flat

LAYOUT = NamedSharding(Mesh(np.array(jax.devices()[:1]), ("x",)), P())
SEEN: list = []  # the shapes the stand-in map was called with, in order


def fake_map(x, dim=0, factor=2):
    """A map splitting ``dim`` of its operand over ``factor`` process positions."""
    probe = jit_shares._state.probe
    if probe is not None:
        probe.note([x], [{dim: factor}], lambda i: LAYOUT, "xmap 'fake'")
    SEEN.append(tuple(x.shape))
    return x * 1.0


def probe(body, *shapes, local=None):
    SEEN.clear()
    avals = [core.ShapedArray(s, np.float32) for s in shapes]
    local = local if local is not None else [True] * len(avals)
    debug = api_util.debug_info("test", body, tuple(range(len(avals))), {})

    def trace(wrap, avals):
        trace_flat(wrap(lambda *a: [body(*a)]), avals, [], debug, binder="jit")

    found = find_shares(trace, avals, local, lambda i: f"args[{i}]", "body")
    return {i: (s.factors, s.global_aval(avals[i]).shape) for i, s in found.items()}


def test_a_directly_mapped_argument_is_a_share_and_the_body_is_traced_again_globally():
    found = probe(lambda x, w: fake_map(x) + w.sum(), (4, 3), (3,))
    assert found == {0: (((0, 2),), (8, 3))}
    assert SEEN == [(8, 3)]  # the first probe stops where the map reports it; the second goes on with its global shape


def test_looked_through_grad_and_other_dimensions():
    assert probe(lambda x: jax.grad(lambda x: fake_map(x, 1, 4).sum())(x), (2, 3)) == {0: (((1, 4),), (2, 12))}


def test_global_arguments_and_unmapped_dimensions_are_left_alone():
    assert probe(lambda x: fake_map(x * 2.0), (4, 3), local=[False]) == {}
    assert probe(lambda x: fake_map(x, factor=1), (4, 3)) == {}


def test_taken_directly_first_then_computed_is_fine():
    assert probe(lambda x: fake_map(x) + fake_map(x * 2.0), (4, 3)) == {0: (((0, 2),), (8, 3))}


@pytest.mark.parametrize("body, needle", [
    (lambda x: fake_map(x * 2.0), "reaches xmap 'fake' through computation"),
    (lambda x: jax.vmap(fake_map)(x), "through computation (or under jax.vmap)"),
    (lambda x: fake_map(x) + fake_map(x, 1), "different dimensions (dimension 0 x2 and dimension 1 x2)"),
    (lambda x: jax.jit(fake_map)(x), "inside a staged computation"),
], ids=["computed", "vmapped", "two_dimensions", "staged"])
def test_ambiguous_uses_are_refused(body, needle):
    with pytest.raises(JitShareError, match="args\\[0\\]") as e:
        probe(body, (4, 4))
    assert needle in str(e.value)
    assert "global jax.Array" in str(e.value)


def test_maps_inside_another_maps_body_are_left_to_the_outer_map():
    def body(x):
        with core.extend_axis_env_nd([("i", 2)]):  # as a pmap's body is traced
            return fake_map(jnp.sin(x))
    assert probe(body, (4, 3)) == {}
