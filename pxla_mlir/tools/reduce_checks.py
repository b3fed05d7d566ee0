"""The checks of ``pxla-mlir reduce`` that need jax, run in its worker processes
(:mod:`pxla_mlir.mlir.reduce.worker`): the module compiled by XLA, and its
results compared between two pipelines or with jax's own run of the module.

* :class:`CompileCheck` loads a candidate as ``pxla-mlir run FILE.mlir`` does
  (the pipeline it needs, or ``pipeline``) and compiles it; the error, if any,
  is the failure.
* :class:`CompareCheck` runs a candidate twice on the same random inputs (as
  ``pxla-mlir run --compare-pipeline``: after ``pipeline`` and after ``other``)
  and compares the results with :mod:`.comparing`; a result that differs is the
  failure. With ``other=None`` the second run is jax's: XLA compiles the text as
  read, with no pxla pass, as ``jax.jit`` compiles jax's StableHLO.

An error on the way (a candidate that does not compile, in a comparison) is no
failure: the note says what it was.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["COMPILE", "COMPARE", "CompileCheck", "CompareCheck", "first_line"]

COMPILE = "pxla_mlir.tools.reduce_checks:CompileCheck"
COMPARE = "pxla_mlir.tools.reduce_checks:CompareCheck"
#: How candidates are named in the checks' messages: one name, so that messages do not change with the file.
NAME = "module"


def first_line(e: BaseException) -> str:
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return lines[0] if lines else type(e).__name__


def _load(text: str, pipeline: str | None):
    from pxla_mlir.stages.text_module import load

    return load(text.encode("utf-8"), pipeline=pipeline, name=NAME)


@dataclasses.dataclass
class CompileCheck:
    pipeline: str | None = None

    def report(self, text: str) -> dict[str, Any]:
        try:
            _load(text, self.pipeline).compile()
        except Exception as e:
            return {"failures": [first_line(e)], "note": ""}
        return {"failures": [], "note": "the module compiles"}


def _as_jax_runs_it(text: str, loaded: Any) -> Any:
    """``text`` compiled by XLA as read (no pxla pass), laid out as ``loaded`` (the same module after pxla's
    pipeline) says its global values are."""
    from jaxlib.mlir import ir

    from pxla_mlir.mlir.core.context import make_context
    from pxla_mlir.stages.signature import Signature
    from pxla_mlir.stages.text_module import LoadedModule, TextLowering

    raw = ir.Module.parse(text, context=make_context())
    layout = loaded.layout
    lowering = TextLowering(raw, raw.operation, pipeline="", layout=layout, source=f"{NAME} as jax runs it")
    return LoadedModule(lowering, Signature.flat(len(layout.in_avals), len(layout.out_avals)),
                        layout_note="as jax runs it")


def _run(lowered: Any, values: Sequence[Any]) -> list[np.ndarray]:
    return [np.asarray(r) for r in lowered.compile()(*values)]


@dataclasses.dataclass
class CompareCheck:
    pipeline: str | None = None
    other: str | None = None  # None: jax's own run
    seed: int = 0
    rtol: float = 1e-5
    atol: float = 1e-8

    def report(self, text: str) -> dict[str, Any]:
        from pxla_mlir.tools.comparing import compare
        from pxla_mlir.tools.running import module_inputs

        try:
            mine = _load(text, self.pipeline)
            other_what = "the run as jax runs it"
            theirs = _as_jax_runs_it(text, mine) if self.other is None else _load(text, self.other)
            a, b = mine.layout.in_avals, theirs.layout.in_avals
            if [(x.shape, x.dtype) for x in a] != [(x.shape, x.dtype) for x in b]:
                return {"failures": [], "note": "the two runs take other arguments"}
            values = module_inputs(a, [], [], self.seed, NAME)
            got = _run(mine, values)
        except Exception as e:
            return {"failures": [], "note": f"the module does not run: {first_line(e)}"}
        try:
            want = _run(theirs, values)
        except Exception as e:
            return {"failures": [], "note": f"{other_what if self.other is None else 'the other pipeline'} "
                                            f"fails: {first_line(e)}"}
        rows = compare(got, want, self.rtol, self.atol)
        differ = [r for r in rows if not r.agrees]
        return {"failures": [f"result {r.index} ({r.type}) differs: {r.why or 'the numbers differ'}" for r in differ],
                "note": "" if differ else f"all {len(rows)} results agree (rtol {self.rtol:g}, atol {self.atol:g})"}
