"""jax's debugging flags inside pxla_mlir's maps: ``jax_log_compiles`` logs
each compile through jax's loggers, ``jax_dump_ir_to`` gets each map's stages
named as jax names its own dumps."""

import logging

import jax
import numpy as np
import pytest

import pxla_mlir


@pytest.fixture
def flag():
    saved = {}

    def set_flag(name, value):
        saved.setdefault(name, jax.config.values[name])
        jax.config.update(name, value)

    yield set_flag
    for name, value in saved.items():
        jax.config.update(name, value)


def step(a):
    return a * 2


def test_jax_log_compiles_logs_a_pmap_compile(flag, caplog):
    flag("jax_log_compiles", True)
    with caplog.at_level(logging.WARNING, logger="jax"):
        pxla_mlir.pmap(step)(np.ones((8, 3), np.float32))
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(m.startswith("Compiling pmap_step with global shapes and types (ShapedArray(float32[8,3]),)")
               for m in lines), lines
    assert any(m.startswith("Finished XLA compilation of pmap_step in ") for m in lines), lines


def test_without_the_flag_compiles_log_at_debug(caplog):
    with caplog.at_level(logging.WARNING, logger="jax"):
        pxla_mlir.pmap(step)(np.ones((8, 4), np.float32))
    assert not [r for r in caplog.records if "pmap_step" in r.getMessage()]


@pytest.mark.parametrize("lowering", ["replica", "vectorize"])
def test_jax_dump_ir_to_gets_each_maps_stages(flag, tmp_path, lowering):
    flag("jax_dump_ir_to", str(tmp_path))
    with pxla_mlir.Mesh.create({"x": 8}):
        pxla_mlir.xmap(step, ["i", ...], ["i", ...], axis_resources={"i": "x"}, lowering=lowering)(
            np.ones((8, 5), np.float32))
    names = sorted(p.name for p in tmp_path.iterdir())
    stages = [n.split("_", 2)[2] for n in names]  # jax_ir0003_<module>_<stage>.mlir
    assert stages == ["xmap_step_pxla.mlir", "xmap_step_compile.mlir"], names
    pxla, final = (tmp_path / n for n in names)
    assert "pxla.mesh" in pxla.read_text() and "stablehlo." in pxla.read_text()  # what import produced
    assert "mhlo." in final.read_text() and "@pxla." not in final.read_text()  # what XLA compiled: no placeholders
