"""The built-in check of ``--pipeline P`` and ``--from-reproducer``: runs a pass
pipeline on a candidate, as ``pxla-opt`` does, and reports its errors.

It runs in a worker process (:mod:`.worker`), in a fresh context per
candidate. Its report lists the error messages (the failures the expected
error is looked for in) and every diagnostic with its place in the candidate,
which :mod:`.lit_test` turns into ``expected-*`` lines.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxlib.mlir import ir

from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.mlir.core.diagnostics import Diagnostic, DiagnosticCollector
from pxla_mlir.mlir.pass_infra.pipeline import Pipeline

__all__ = ["PipelineCheck", "CHECK", "diagnostic_dict", "diagnostic_from_dict"]

#: What a worker's spec names to run this check.
CHECK = "pxla_mlir.mlir.reduce.pipeline_check:PipelineCheck"


def diagnostic_dict(d: Diagnostic) -> dict[str, Any]:
    loc = d.loc
    return {"severity": d.severity, "message": d.message,
            "loc": None if loc is None else [loc.file, loc.line, loc.col],
            "notes": [diagnostic_dict(n) for n in d.notes]}


def diagnostic_from_dict(data: dict[str, Any]) -> Diagnostic:
    from pxla_mlir.mlir.core.diagnostics import SourceLoc

    loc = data.get("loc")
    return Diagnostic(data["severity"], data["message"], None if loc is None else SourceLoc(*loc),
                      tuple(diagnostic_from_dict(n) for n in data.get("notes", ())))


@dataclasses.dataclass
class PipelineCheck:
    """Runs ``pipeline`` (verified after every pass when ``verify_each``, as pxla-opt --verify-each)."""

    pipeline: str
    verify_each: bool = True

    def report(self, text: str) -> dict[str, Any]:
        ctx = make_context(threading=False)
        with DiagnosticCollector(ctx) as diags, ctx:
            try:
                module = ir.Module.parse(text)
                pipeline = Pipeline.cached(self.pipeline, ctx)
                pm = pipeline.pass_manager(ctx, "every-pass" if self.verify_each else "pxla-changes")
                pm.run(module.operation)
                if not pipeline.verified_at_end("every-pass" if self.verify_each else "pxla-changes"):
                    module.operation.verify()
            except ir.MLIRError as e:
                diags.add_error(e)
                if not diags.errors:
                    diags.add(Diagnostic("error", str(e).strip(), None))
            found = list(diags.diagnostics)
        return {"failures": [d.message for d in found if d.severity == "error"],
                "note": "the pipeline succeeds" if not any(d.severity == "error" for d in found) else "",
                "diagnostics": [diagnostic_dict(d) for d in found]}
