"""Every pass and pipeline jaxlib registers runs through pxla-opt: it either
transforms a small module or fails with a located MLIR error, never an
internal error or a crash."""

import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import jaxlib.version
import pytest
from conftest import REPO

from pxla_mlir.mlir.pass_infra import jaxlib_passes

pytestmark = pytest.mark.subprocess

SMALL = """\
module @small attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<8xf32> {
    %0 = stablehlo.negate %arg0 : tensor<8xf32>
    %1 = "mhlo.all_reduce"(%0) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<8xf32>) -> tensor<8xf32>
    %2 = call @helper(%1) : (tensor<8xf32>) -> tensor<8xf32>
    return %2 : tensor<8xf32>
  }
  func.func private @helper(%x: tensor<8xf32>) -> tensor<8xf32> {
    %c = stablehlo.constant dense<2.0> : tensor<8xf32>
    %0 = stablehlo.multiply %x, %c : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
"""

# Runs pxla-opt in-process on each pass in turn; a line per pass goes to the
# results file before and after it, so a crash names its pass.
WORKER = """
import contextlib, io, json, os, sys
from pxla_mlir.mlir.cli import pxla_opt
source, results, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(results, "a") as log:
    for name in names:
        log.write(json.dumps({"start": name}) + "\\n"); log.flush()
        pipeline = name if not name.startswith("func:") else f"func.func({name[5:]})"
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = pxla_opt.main([source, f"--pass-pipeline=builtin.module({pipeline})", "-o", os.devnull])
        log.write(json.dumps({"name": name, "rc": rc, "err": err.getvalue()}) + "\\n"); log.flush()
"""


@pytest.mark.slow
def test_the_list_is_jaxlibs():
    # In a fresh process, which has only what pxla-opt registers (importing parts of jax, e.g.
    # its Mosaic dialect, registers more passes in the process that does it).
    assert jaxlib.version.__version__ == jaxlib_passes.JAXLIB_VERSION, \
        "no list for the installed jaxlib: add it, see pxla_mlir/mlir/pass_infra/jaxlib_passes.py"
    generated = subprocess.run([sys.executable, "-m", "pxla_mlir.mlir.pass_infra.jaxlib_passes"], capture_output=True,
                               text=True, timeout=300, cwd=REPO)
    assert generated.returncode == 0, generated.stderr
    listed = pathlib.Path(jaxlib_passes.list_path(jaxlib.version.__version__))
    assert generated.stdout == listed.read_text(), "regenerate: see pxla_mlir/mlir/pass_infra/jaxlib_passes.py"
    assert {"canonicalize", "cse", "stablehlo-legalize-to-hlo"} <= set(jaxlib_passes.MODULE_PASSES)
    assert "chlo-legalize-to-hlo" in jaxlib_passes.FUNC_PASSES
    assert "sdy-propagation-pipeline" in jaxlib_passes.PIPELINES


def _sweep(tmp_path, names: list[str]) -> dict[str, dict]:
    """{name: result}; a pass that kills or hangs the worker gets rc 'crash'."""
    source, results = tmp_path / "small.mlir", tmp_path / "results.jsonl"
    source.write_text(SMALL)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done: dict[str, dict] = {}
    todo = list(names)
    while todo:
        try:
            proc = subprocess.run([sys.executable, "-c", textwrap.dedent(WORKER), str(source), str(results), *todo],
                                  capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
            how = f"exit status {proc.returncode}: {proc.stderr[-2000:]}"
        except subprocess.TimeoutExpired:
            how = "no result after 300 s"
        lines = [json.loads(line) for line in results.read_text().splitlines()]
        for r in lines:
            if "name" in r:
                done[r["name"]] = r
        started = [r["start"] for r in lines if "start" in r]
        stuck = next((n for n in started if n not in done), None)
        if stuck is not None:
            done[stuck] = {"name": stuck, "rc": "crash", "err": how}
        todo = [n for n in todo if n not in done]
        if stuck is None and todo:  # the worker died before starting any: stop, not loop
            raise AssertionError(f"the pass worker failed: {how}")
    return done


def test_every_jaxlib_pass_runs_or_fails_with_a_located_error(tmp_path):
    names = [*jaxlib_passes.MODULE_PASSES, *jaxlib_passes.PIPELINES,
             *(f"func:{n}" for n in jaxlib_passes.FUNC_PASSES)]
    results = _sweep(tmp_path, names)
    assert sorted(results) == sorted(names)
    bad = {}
    for name, r in results.items():
        if r["rc"] == 0:
            continue
        located = re.search(r"^\S*small\.mlir:\d+:\d+: error: ", r["err"], re.M)
        if r["rc"] != 1 or not located or "internal error" in r["err"] or "Traceback" in r["err"]:
            bad[name] = (r["rc"], r["err"][-600:])
    assert not bad, bad
    ran = [n for n, r in results.items() if r["rc"] == 0]
    assert len(ran) > len(names) * 0.9, f"only {len(ran)} of {len(names)} ran"  # the module suits most passes
    assert results["sdy-propagation-pipeline"]["rc"] == 0
