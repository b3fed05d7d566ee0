"""The stages of a map: ``Lowered`` (MHLO) and ``Compiled`` (an executable).

Both pmap and xmap import a module in "pxla form", then a ``Lowered`` runs
the pass pipeline on it; ``compile()`` hands the result to XLA.
"""

from __future__ import annotations

import collections
import contextlib
import tempfile
import time
from typing import Any, Callable, Sequence

from jax import tree_util
from jaxlib.mlir import ir

from .pass_infra import Pipeline, PipelineFailure, run_pipeline
from .runtime import ShardedExecutable

__all__ = ["Lowered", "Compiled", "STATS", "TIMINGS", "timed"]

#: Counts of the expensive steps, for tests and benchmarks.
STATS: collections.Counter = collections.Counter()
#: Seconds spent in each step ("trace", "import", "passes", "compile"), summed
#: since the last reset (pxla-mlir run reports them).
TIMINGS: collections.Counter = collections.Counter()


@contextlib.contextmanager
def timed(step: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        TIMINGS[step] += time.perf_counter() - start


class Lowered:
    """A map lowered to MHLO: the pxla form from import, and the final module."""

    def __init__(self, module: ir.Module, pipeline: str, devices: Sequence,
                 make_executable: Callable[[ir.Module, list], ShardedExecutable], *, keepalive: Any = None,
                 consts: Sequence = (), jaxpr_text: Callable[[], str] | None = None):
        STATS["lowerings"] += 1
        self.pipeline = pipeline
        self._imported = module.operation.clone()  # printed only if asked for
        try:
            with timed("passes"):
                run_pipeline(module, Pipeline.cached(pipeline), reproducer=False, verify_each=False)
        except PipelineFailure as e:
            raise PipelineFailure(e.pipeline, e.diagnostics, _save(self.pxla_text(debug_info=True))) from None
        self._module = module
        self._devices = list(devices)
        self._make_executable = make_executable
        self._keepalive = keepalive
        self._consts = list(consts)
        self._jaxpr_text = jaxpr_text  # printed only if asked for
        self.signature: tuple | None = None  # (flatten(args) -> leaves, out_tree), set by the map
        self._compiled: Compiled | None = None

    def as_text(self, *, debug_info: bool = False) -> str:
        """The final MHLO (deterministic: no locations unless ``debug_info``)."""
        return self._module.operation.get_asm(enable_debug_info=debug_info)

    def pxla_text(self, *, debug_info: bool = False) -> str:
        """The imported pxla form, before the pipeline ran."""
        return self._imported.get_asm(enable_debug_info=debug_info)

    def jaxpr_text(self) -> str | None:
        """The traced jaxpr, when the map recorded it."""
        return self._jaxpr_text() if self._jaxpr_text is not None else None

    def mhlo(self) -> ir.Module:
        return self._module

    def explore(self, path: str | None = None, **options) -> str:
        """Writes the explore page (every stage, collectives, shardings) to
        ``path`` and returns the path; with no path, returns the HTML."""
        from .explore import explore_html

        html = explore_html(self, **options)
        if path is None:
            return html
        with open(path, "w", encoding="utf-8") as f:
            f.write(html)
        return path

    def _repr_html_(self) -> str:
        from .explore import notebook_html

        return notebook_html(self)

    @property
    def devices(self) -> list:
        return list(self._devices)

    def compile(self) -> "Compiled":
        if self._compiled is None:
            STATS["compiles"] += 1
            with timed("compile"):
                exe = self._make_executable(self._module, self._devices)
            exe.keepalive = self._keepalive
            self._compiled = Compiled(exe, self._consts, self.signature)
        return self._compiled


def _save(text: str) -> str:
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", prefix="pxla_repro_", delete=False) as f:
        f.write(text)
    return f.name


class Compiled:
    """A compiled map; call it with arguments like those it was lowered for."""

    def __init__(self, executable: ShardedExecutable, consts: Sequence, signature):
        self._executable = _WithConsts(executable, consts) if consts else executable
        self._signature = signature

    def __call__(self, *args):
        if self._signature is None:
            raise TypeError("this Compiled object was made without a signature; call .call_flat(leaves)")
        flatten, out_tree = self._signature
        return tree_util.tree_unflatten(out_tree, self._executable(flatten(args)))

    def call_flat(self, leaves: Sequence) -> list:
        return self._executable(list(leaves))

    def as_text(self) -> str:
        """XLA's optimized HLO."""
        return self._executable.hlo_text()

    def cost_analysis(self):
        return self._executable.cost_analysis()


class _WithConsts:
    """An executable whose first arguments are hoisted constants."""

    def __init__(self, exe: ShardedExecutable, consts: Sequence):
        self._exe, self._consts = exe, list(consts)

    def __call__(self, flat_args):
        return self._exe(self._consts + list(flat_args))

    def __getattr__(self, name):
        return getattr(self._exe, name)
