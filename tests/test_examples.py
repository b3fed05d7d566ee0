"""The examples run correctly, and their MHLO is pinned by golden files
(examples/goldens/, refreshed with pytest --update-goldens)."""

import jax
import numpy as np
import pytest
from conftest import REPO

from pxla_mlir.tools.emit import MapOptions, lower_target, prepare
from pxla_mlir.tools.targets import resolve

EXAMPLES = {
    "train_step": "examples/train_step.py:train_step",
    "nested_reduction": "examples/nested_reduction.py:two_level_sum",
    "xmap_2d": "examples/xmap_2d.py:normalise_2d",
}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_golden_mhlo(name, golden):
    lowered = lower_target(str(REPO / EXAMPLES[name]), MapOptions())
    golden.at(REPO / "examples" / "goldens").check(f"{name}.mlir", lowered.as_text())


def run_example(name, seed=0):
    prepared = prepare(str(REPO / EXAMPLES[name]), MapOptions())
    rng = np.random.default_rng(seed)
    args = [spec.random(rng) for spec in prepared.args]
    with prepared.context():
        return args, prepared.fn(*args)


def test_train_step_matches_single_device_training():
    loss_fn = resolve(f"{REPO}/examples/train_step.py:loss")
    args, (w1, b1, w2, loss) = run_example("train_step")
    p, x, y = tuple(args[:3]), args[3], args[4]
    # The same step on one device: gradient of the mean loss over all shards.
    value, grads = jax.value_and_grad(lambda q: jnp_mean([loss_fn(q, x[i], y[i]) for i in range(8)]))(p)
    want = [a - 0.1 * g for a, g in zip(p, grads)]
    for got, w in zip((w1, b1, w2), want):
        np.testing.assert_allclose(np.asarray(got), np.asarray(w), rtol=2e-4, atol=1e-5)
    np.testing.assert_allclose(float(loss), float(value), rtol=1e-5)


def jnp_mean(values):
    return sum(values) / len(values)


def test_nested_reduction_matches_numpy():
    (x,), (partial, total) = run_example("nested_reduction")
    np.testing.assert_allclose(np.asarray(partial), np.broadcast_to(x.sum(1)[:, :, None], (2, 128, 4)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(total), np.broadcast_to(x.sum((0, 1)), (2, 4, 128)), rtol=1e-5, atol=1e-6)


def test_xmap_2d_matches_vmap():
    normalise = resolve(f"{REPO}/examples/xmap_2d.py:normalise")
    (v,), got = run_example("xmap_2d")
    want = jax.vmap(jax.vmap(normalise, axis_name="feat"), axis_name="batch")(v)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
