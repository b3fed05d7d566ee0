"""Comparing pytrees of results against a reference computed without pxla_mlir."""

import jax
import numpy as np


def assert_close(got, want, tol=1e-4):
    got_leaves, want_leaves = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got_leaves) == len(want_leaves), f"{len(got_leaves)} results, the reference has {len(want_leaves)}"
    for g, w in zip(got_leaves, want_leaves):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)
