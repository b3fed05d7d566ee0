"""A map whose pass pipeline fails saves a reproducer, and ``pxla-opt --run-reproducer`` replays it to the
same error (the reproducer names the pipeline the map ran)."""

import dataclasses
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

import pxla_mlir
from pxla_mlir.mlir.pass_infra import NamedPipeline, PipelineFailure, reproducer
from pxla_mlir.mlir.pipelines import PmapPipeline
from pxla_mlir.passes.verify_handoff import VerifyHandoffPass
from pxla_mlir.pmaps import lower as pmap_lower
from pxla_mlir.stages import map_lowering


@pytest.fixture
def failing_pmap_pipeline(monkeypatch):
    """pmaps lower with their real pipeline followed by a handoff check no module of 8 devices passes."""

    @dataclasses.dataclass(frozen=True)
    class Failing(NamedPipeline):
        argument = "test-failing-pipeline"
        summary = "A map's pipeline, then a check no module of 8 devices passes"
        of: NamedPipeline = PmapPipeline()

        def steps(self):
            return [*self.of.steps(), VerifyHandoffPass(num_replicas=3, num_partitions=3)]

    class FailingInputs:
        def __init__(self, inputs):
            self.inputs = inputs

        def __getattr__(self, name):
            return getattr(self.inputs, name)

        pipeline = property(lambda self: Failing(self.inputs.pipeline))
        cacheable = False

    def lower_then_fail(inputs, **kwargs):
        return map_lowering.lower_cached(FailingInputs(inputs), **kwargs)

    monkeypatch.setattr(pmap_lower, "lower_cached", lower_then_fail)


@pytest.mark.subprocess
def test_a_failing_map_pipeline_saves_a_reproducer_that_replays_to_the_same_error(failing_pmap_pipeline, tmp_path,
                                                                                   monkeypatch):
    monkeypatch.setenv("PXLA_REPRO_DIR", str(tmp_path))
    f = pxla_mlir.pmap(lambda x: jax.lax.psum(x, "i"), "i")
    with pytest.raises(PipelineFailure) as e:
        f.lower(jnp.ones((8, 2), jnp.float32))
    saved = e.value.reproducer
    assert saved is not None and str(e.value).endswith(f"\nreproduce with: pxla-opt --run-reproducer {saved}")
    _, recorded = reproducer.split(pathlib.Path(saved).read_bytes())
    assert recorded == reproducer.Recorded(str(e.value.pipeline), verify_each=False)  # as the map ran it

    rerun = subprocess.run([sys.executable, "-m", "pxla_mlir.mlir.cli.pxla_opt", "--run-reproducer", saved],
                           capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 1 and not rerun.stdout, rerun.stderr
    replayed = [line.split(" error: ", 1)[1] for line in rerun.stderr.splitlines() if " error: " in line]
    assert replayed == [d.message for d in e.value.diagnostics if d.severity == "error"], rerun.stderr
