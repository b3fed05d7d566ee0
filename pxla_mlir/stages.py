"""The stages of a map: ``Lowered`` (MHLO) and ``Compiled`` (an executable).

pmap, xmap and ``pxla_mlir.jit`` import a module in "pxla form" and build a
``Lowered`` from it together with everything a call needs: the devices, the
global avals and shardings of the flat inputs and outputs, and the call
signature (how arguments flatten, how outputs unflatten). ``Lowered`` runs
the pass pipeline; ``compile()`` hands the result to XLA and wraps the
executable for calls.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import time
from typing import Any, Callable, Sequence

from jax import tree_util
from jaxlib.mlir import ir

from .compile import compile_module
from .pass_infra import Pipeline, PipelineFailure, run_pipeline
from .pass_infra.reproducer import save as _save
from .runtime import ShardedExecutable

__all__ = ["Signature", "Lowered", "Compiled", "STATS", "TIMINGS", "timed"]

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


@dataclasses.dataclass(frozen=True)
class Signature:
    """How a call's arguments become the flat inputs, and flat outputs a pytree.

    ``in_tree`` is the pytree of the dynamic arguments (the positional
    arguments without ``static_argnums``).
    """

    in_tree: Any
    out_tree: Any
    static_argnums: tuple[int, ...] = ()

    @classmethod
    def flat(cls, n_in: int, n_out: int) -> "Signature":
        """Flat leaves in, a list of leaves out."""
        return cls(tree_util.tree_structure((0,) * n_in), tree_util.tree_structure([0] * n_out))

    def flatten(self, args: Sequence) -> list:
        static = set(self.static_argnums)
        leaves, tree = tree_util.tree_flatten(tuple(a for i, a in enumerate(args) if i not in static))
        if tree != self.in_tree:
            raise TypeError(f"compiled for arguments with structure {self.in_tree}, got {tree}")
        return leaves

    def unflatten(self, outs: Sequence):
        return tree_util.tree_unflatten(self.out_tree, outs)


class Lowered:
    """A map lowered to MHLO: the pxla form from import, the final module, and
    the layout of its flat inputs and outputs on ``devices``.

    ``consts`` are values hoisted out of the body: the first flat inputs,
    supplied by ``Compiled`` itself (``in_avals``/``in_shardings`` include them).
    ``plan`` is an xmap's plan (named axes, sizes, resources); None for pmap.
    """

    def __init__(self, module: ir.Module, *, pipeline: str, devices: Sequence, in_avals: Sequence,
                 out_avals: Sequence, in_shardings: Sequence, out_shardings: Sequence, signature: Signature,
                 consts: Sequence = (), keepalive: Any = None, jaxpr_text: Callable[[], str] | None = None,
                 plan: Any = None):
        STATS["lowerings"] += 1
        self.pipeline = pipeline
        self._imported = module.operation.clone()  # printed only if asked for
        try:
            with timed("passes"):
                run_pipeline(module, Pipeline.cached(pipeline), reproducer=False, verify_each=False)
        except PipelineFailure as e:
            raise PipelineFailure(e.pipeline, e.diagnostics, _save(self.pxla_text(debug_info=True))) from None
        self._module = module
        self.devices = tuple(devices)
        self.in_avals, self.out_avals = tuple(in_avals), tuple(out_avals)
        self.in_shardings, self.out_shardings = tuple(in_shardings), tuple(out_shardings)
        self.signature = signature
        self.consts = tuple(consts)
        self._keepalive = keepalive
        self._jaxpr_text = jaxpr_text  # printed only if asked for
        self.plan = plan
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

    def compile(self) -> "Compiled":
        if self._compiled is None:
            STATS["compiles"] += 1
            with timed("compile"):
                xla = compile_module(self._module, self.devices)
            exe = ShardedExecutable(xla, self.devices, in_shardings=self.in_shardings,
                                    out_shardings=self.out_shardings, in_avals=self.in_avals,
                                    out_avals=self.out_avals, keepalive=self._keepalive)
            self._compiled = Compiled(exe, self.consts, self.signature)
        return self._compiled


class Compiled:
    """A compiled map; call it with arguments like those it was lowered for."""

    def __init__(self, executable: ShardedExecutable, consts: Sequence, signature: Signature):
        self.executable = executable
        self.signature = signature
        self._consts = list(consts)

    def __call__(self, *args):
        return self.signature.unflatten(self.call_flat(self.signature.flatten(args)))

    def call_flat(self, leaves: Sequence) -> list:
        """Runs on flat dynamic inputs (without the hoisted constants)."""
        return self.executable(self._consts + list(leaves) if self._consts else leaves)

    def as_text(self) -> str:
        """XLA's optimized HLO."""
        return self.executable.hlo_text()

    def cost_analysis(self):
        return self.executable.cost_analysis()
