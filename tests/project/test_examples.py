"""The examples run correctly, and their MHLO is pinned by golden files
(examples/goldens/, refreshed with pytest --pxla-update-goldens). `make demo`
runs on 8 CPU devices where jax's default backend has fewer."""

import os
import subprocess
import sys

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
def test_golden_mhlo(name, pxla_golden):
    lowered = lower_target(str(REPO / EXAMPLES[name]), MapOptions())
    pxla_golden.at(REPO / "examples" / "goldens").check(f"{name}.mlir", lowered.as_text())


def run_example(name, seed=0):
    prepared = prepare(str(REPO / EXAMPLES[name]), MapOptions())
    rng = np.random.default_rng(seed)
    args = [spec.random(rng) for spec in prepared.args]
    with prepared.context():
        return args, prepared.fn(*args)


@pytest.mark.slow
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


def _demo(**env_changes):
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_NUM_CPU_DEVICES", "JAX_PLATFORMS")}
    env.update(env_changes)
    return subprocess.run([sys.executable, str(REPO / "examples" / "pmap_demo.py")], capture_output=True, text=True,
                          env=env, timeout=600, cwd=REPO)


@pytest.mark.subprocess
def test_demo_starts_the_cpu_devices_it_needs():
    """`make demo` in a shell whose XLA_FLAGS asks for 2 CPU devices (other flags kept) still runs on 8."""
    result = _demo(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_cpu_enable_fast_math=false "
                                                  "--xla_force_host_platform_device_count=2")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "=== run on 8 CPU devices; result (2, 3, 4):" in result.stdout
    assert "=== match: True" in result.stdout
    assert "default backend" not in result.stdout  # CPU is the default backend here: nothing to say


@pytest.mark.subprocess
def test_demo_raises_a_smaller_jax_num_cpu_devices():
    result = _demo(JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES="2", XLA_FLAGS="")
    assert result.returncode == 0, result.stderr[-3000:]  # the demo raises JAX_NUM_CPU_DEVICES too
    assert "=== run on 8 CPU devices" in result.stdout


class _Device:
    def __init__(self, platform):
        self.platform = platform


def test_demo_runs_on_cpu_devices_when_the_default_backend_has_too_few():
    """A one-chip TPU host: jax's default backend has 1 device; the demo says so in one line and picks the CPU."""
    from examples.pmap_demo import choose_backend

    backend, line = choose_backend([_Device("tpu")], [_Device("cpu")] * 8)
    assert backend == "cpu"
    assert line == ("=== jax's default backend (TPU) has 1 device(s), the demo needs 8: running on 8 CPU devices "
                    "(backend='cpu'; JAX_PLATFORMS=cpu does the same)")
    assert choose_backend([_Device("tpu")] * 8, []) == (None, "")
    assert choose_backend([_Device("cpu")] * 8, [_Device("cpu")] * 8) == (None, "")
    with pytest.raises(SystemExit, match=r"jax's default backend \(TPU\) has 1 and its CPU backend 0: start jax with "
                                         r"XLA_FLAGS=--xla_force_host_platform_device_count=8 and JAX_PLATFORMS "
                                         r"naming cpu"):
        choose_backend([_Device("tpu")], [])
    with pytest.raises(SystemExit, match=r"jax's default backend \(CPU\) has 2: start jax with XLA_FLAGS="):
        choose_backend([_Device("cpu")] * 2, [_Device("cpu")] * 2)
