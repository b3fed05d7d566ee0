"""A backend jax cannot start (JAX_PLATFORMS naming an absent platform, a
missing plugin, pmap's backend= of another platform) is the environment's
mistake: every entry point says what, where and how to fix it, never jax's
bare AssertionError tagged as a pxla_mlir bug. Each case runs in a fresh
interpreter (jax picks its platforms once), with a hard timeout."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import REPO

import pxla_mlir

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax_cuda12_plugin") is not None,
                                reason="jax's CUDA plugin is installed: JAX_PLATFORMS=cuda may start")

_CUDA_FIX = ("This is the environment, not the program: install jax's CUDA plugin (pip install -U 'jax[cuda12]') on "
             "a machine whose NVIDIA GPU nvidia-smi lists (and CUDA_VISIBLE_DEVICES does not hide), or set "
             "JAX_PLATFORMS=cpu to run on the CPU (or JAX_PLATFORMS='' to let jax choose)")
_NO_CUDA = "jax cannot start its backend: JAX_PLATFORMS=cuda names no platform that could start"

_MODULE = """module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    return %a : tensor<3xf32>
  }
}
"""


def _run(argv, platforms: str, cwd=REPO):
    env = {**{k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")},
           "JAX_PLATFORMS": platforms, "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


@pytest.mark.subprocess
def test_every_python_entry_point_says_the_backend_cannot_start():
    code = textwrap.dedent(f"""
        import numpy as np, pxla_mlir
        from pxla_mlir.errors import PxlaUserError
        x = np.ones((1, 3), np.float32)
        entries = {{
            "pmap": lambda: pxla_mlir.pmap(lambda v: v * 2)(x),
            "pmap lower": lambda: pxla_mlir.pmap(lambda v: v * 2).lower(x),
            "xmap": lambda: pxla_mlir.xmap(lambda v: v * 2, in_axes=["m", ...], out_axes=["m", ...])(x),
            "xmap lower": lambda: pxla_mlir.xmap(lambda v: v * 2, in_axes=["m", ...], out_axes=["m", ...]).lower(x),
            "jit": lambda: pxla_mlir.jit(lambda v: v * 2)(x),
            "load": lambda: pxla_mlir.load({_MODULE!r}),
            "mesh": lambda: pxla_mlir.Mesh.create({{"x": 1}}),
        }}
        for name, entry in entries.items():
            for attempt in range(2):  # the same the second time (jax keeps no half-started backend)
                try:
                    entry()
                    print(name, "RAN")
                except Exception as e:
                    print(name, "|", type(e).__name__, isinstance(e, (PxlaUserError, RuntimeError)), "|", e)
    """)
    result = _run(["-c", code], "cuda")
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert len(lines) == 14, result.stdout
    wheres = {"pmap": "pmap '<lambda>'", "pmap lower": "pmap '<lambda>'.lower()", "xmap": "xmap '<lambda>'",
              "xmap lower": "xmap '<lambda>'.lower()", "jit": "pxla_mlir.jit '<lambda>'",
              "load": "pxla_mlir.load(<module>)", "mesh": "Mesh.create"}
    for line in lines:
        name, kind, message = (part.strip() for part in line.split("|", 2))
        assert kind == "BackendError True", line
        assert message == f"{wheres[name]}: {_NO_CUDA} (jax skips 'cuda' when it sees no NVIDIA GPU). {_CUDA_FIX}", line


@pytest.mark.parametrize("argv", [["run", "m.mlir"], ["run", "m.mlir", "--processes", "2"],
                                  ["run", "REPO/examples/pmap_demo.py:inner", "--map", "pmap", "--arg", "f32[2,3]"],
                                  ["emit", "REPO/examples/pmap_demo.py:inner", "--map", "pmap", "--arg", "f32[2,3]"]],
                         ids=["run-module", "run-processes", "run-target", "emit"])
@pytest.mark.subprocess
def test_cli_says_the_backend_cannot_start_in_one_line(tmp_path, argv):
    (tmp_path / "m.mlir").write_text(_MODULE)
    argv = [a.replace("REPO", str(REPO)) for a in argv]
    result = _run(["-m", "pxla_mlir.tools.cli", *argv], "cuda", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("pxla-mlir: error: ") and _NO_CUDA in line, line
    assert line.endswith(f"{_CUDA_FIX} (pxla-mlir: --backend cpu)"), line
    assert "PXLA_DEBUG" not in line and "AssertionError" not in line


@pytest.mark.subprocess
def test_an_unknown_platform_names_what_jax_has():
    result = _run(["-m", "pxla_mlir.tools.cli", "run", str(REPO / "test/lit/Inputs/centre_plus_mean.mlir")], "bogus")
    assert result.returncode == 2, result.stderr
    assert "jax cannot start its backend: Unable to initialize backend 'bogus'" in result.stderr
    assert "name only platforms jax has (cpu, cuda, rocm, tpu), not 'bogus', or set JAX_PLATFORMS=cpu" in result.stderr
    assert "PXLA_DEBUG" not in result.stderr


def test_a_backend_argument_of_an_absent_platform():
    from pxla_mlir.mlir.sharding.devices import BackendError

    with pytest.raises(RuntimeError) as e:  # jax.pmap's type
        pxla_mlir.pmap(lambda v: v * 2, backend="gpu")(np.ones((1, 3), np.float32))
    assert isinstance(e.value, BackendError)
    assert str(e.value).startswith("pmap '<lambda>': jax cannot start its backend 'gpu': Unknown backend: 'gpu' "
                                   "requested")
    assert str(e.value).endswith("or pass backend='cpu' (or None for jax's default) instead of backend='gpu'")
