"""Replaying a pipeline one elementary pass at a time.

``pxla-mlir emit --stage after:<pass>`` / ``--dump-dir``, the explore page's
per-pass stages and the benchmarks all need the module after each pass. A
pipeline's steps (:class:`.pipeline.Pipeline`) merge consecutive jaxlib
passes into one text; :func:`elementary_steps` splits them again, so every
pass (pxla or jaxlib, nested ones like ``func.func(cse)`` included) is one
step, run by its own PassManager.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from jaxlib.mlir import ir

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.pass_infra.options import split_top_level
from pxla_mlir.mlir.pass_infra.pipeline import Pipeline, Step, run_pipeline

__all__ = ["elementary_steps", "step_name", "run_stepwise", "UnknownStepError"]

#: on_step(index from 1, pass argument, the module after the pass, seconds the pass took)
OnStep = Callable[[int, str, ir.Module, float], None]


class UnknownStepError(PxlaUserError, ValueError):
    """``stop_after`` names a pass the pipeline does not run."""

    def __init__(self, name: str, names: list[str]):
        self.name, self.names = name, names
        super().__init__(f"the pipeline runs no pass {name!r}; it runs {', '.join(names)}")


def elementary_steps(pipeline: Pipeline) -> list[Step]:
    """One entry per pass: pxla pass instances, and single jaxlib pass texts."""
    steps: list[Step] = []
    for step in pipeline.steps:
        steps.extend(split_top_level(step, ",") if isinstance(step, str) else [step])
    return steps


def step_name(step: Step) -> str:
    """A pass's argument; for a nested pass (``func.func(cse)``) the inner one."""
    if not isinstance(step, str):
        return step.argument
    return re.findall(r"[\w.\-]+", step.rpartition("(")[2])[0]


def run_stepwise(module: ir.Module, pipeline: Pipeline, *, stop_after: str | None = None,
                 on_step: OnStep | None = None) -> ir.Module:
    """Runs ``pipeline`` on ``module`` in place, one pass at a time, calling
    ``on_step`` after each; stops after the pass named ``stop_after``."""
    steps = elementary_steps(pipeline)
    names = [step_name(s) for s in steps]
    if stop_after is not None and stop_after not in names:
        raise UnknownStepError(stop_after, names)
    for index, (step, name) in enumerate(zip(steps, names), start=1):
        start = time.perf_counter()
        run_pipeline(module, Pipeline((step,)), reproducer=False)
        if on_step is not None:
            on_step(index, name, module, time.perf_counter() - start)
        if name == stop_after:
            break
    return module
