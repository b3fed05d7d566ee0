"""One run of ``pxla-mlir reduce``: the input read and checked, the test built
and asked about the input, the reduction, the outputs written and the summary.

The input must parse and verify, and be interesting; then so must the same
module as MLIR prints it (the first candidate): printed without its locations,
or with them for a test that reads them. A test that needs the input's exact
text (its comments, its layout) cannot be reduced, and the message says so.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from pxla_mlir.tools.errors import CliError, write_output
from pxla_mlir.tools.reduce_tests import Test, build_test

__all__ = ["Session"]

PROG = "pxla-mlir reduce"


def _anchored(pipeline: str) -> str:
    text = pipeline.strip()
    return text if text.startswith("builtin.module(") else f"builtin.module({text})"


def _check_pipeline(flag: str, pipeline: str) -> None:
    from pxla_mlir.mlir.core.context import make_context
    from pxla_mlir.mlir.pass_infra import Pipeline, PipelineSyntaxError

    try:
        Pipeline.parse(pipeline, make_context())
    except PipelineSyntaxError as e:
        raise CliError(f"{flag}: {e.message} (at column {e.col + 1} of {e.text!r}; pxla-opt --list-passes lists the "
                       f"passes)") from None


class Session:
    def __init__(self, args: argparse.Namespace, mode: str, source: str, data: bytes, directory: str):
        self.args, self.mode, self.source, self.data, self.directory = args, mode, source, data, directory

    def _module_text(self):
        from pxla_mlir.mlir.core.nesting_depth import NestingError, check_nesting
        from pxla_mlir.mlir.pass_infra import reproducer

        try:
            check_nesting(self.data)
        except NestingError as e:
            raise CliError(f"{self.source}:{e.line}:{e.col}: {e.message}") from None
        module, recorded = reproducer.split(self.data)
        try:
            return module.decode("utf-8"), recorded
        except UnicodeDecodeError as e:
            raise CliError(f"{self.source}: byte {e.start} is not UTF-8; give the module as MLIR text ("
                           f"pxla-opt {self.source} -o module.mlir prints bytecode as text)") from None

    def _test(self, recorded: Any) -> Test:
        from pxla_mlir.mlir.pass_infra import plugins, reproducer
        from pxla_mlir.mlir.pass_infra.registry import REGISTRY

        a = self.args
        pipeline, verify_each = a.pipeline, False
        if self.mode == "reproducer":
            if recorded is None:
                raise CliError(f"{self.source} records no pipeline: a reproducer ends with {{-# external_resources: "
                               f"{{mlir_reproducer: {{pipeline: \"...\"}}}} #-}}; reduce a module with --pipeline "
                               f"PIPELINE instead")
            for spec in recorded.plugins:
                try:
                    plugins.load_plugin(spec)
                except plugins.PluginError as e:
                    raise CliError(f"{self.source} records the pass plugin {spec!r}, which does not load: {e}") \
                        from None
            pipeline, verify_each = recorded.pipeline, recorded.verify_each
        if pipeline is not None:
            pipeline = _anchored(pipeline)
            _check_pipeline("--pipeline" if self.mode != "reproducer" else f"{self.source}'s pipeline", pipeline)
        if a.compare_pipeline is not None:
            a.compare_pipeline = _anchored(a.compare_pipeline)
            _check_pipeline("--compare-pipeline", a.compare_pipeline)
        wrap = None
        if recorded is not None and self.mode == "test":
            wrap = lambda text: reproducer.with_trailer(text, recorded)  # noqa: E731
        return build_test(self.mode, a, directory=self.directory, pipeline=pipeline, plugins=REGISTRY.plugin_specs(),
                          verify_each=verify_each, wrap=wrap)

    def _first(self, module: str, test: Test, evaluator: Any):
        """The input as MLIR prints it, and its printer, once the test finds it interesting."""
        from jaxlib.mlir import ir

        from pxla_mlir.mlir.core.diagnostics import Diagnostic
        from pxla_mlir.mlir.reduce.candidate import Printer

        printer = Printer()
        try:
            text, size = printer.normalized(module)
        except ir.MLIRError as e:
            found = [Diagnostic.from_mlir(d).format(self.source) for d in e.error_diagnostics]
            first = found[0].splitlines()[0] if found else f"{self.source}: {str(e).strip().splitlines()[0]}"
            raise CliError(f"{first} (the reducer starts from a module that parses and verifies)") from None
        verdict = test.first_verdict(module)
        if not verdict.interesting:
            raise CliError(f"{self.source} is not interesting: {verdict.detail or 'the test fails on it'}; the test "
                           f"must succeed on the input{self._hint(test)}")
        if text == module or evaluator.verdict(text).interesting:
            return printer, text, size
        printer = Printer(debug_info=True)
        text, size = printer.normalized(module)
        if evaluator.verdict(text).interesting:
            return printer, text, size
        raise CliError(f"the test succeeds on {self.source} but not on the same module as MLIR prints it "
                       f"(pxla-opt {self.source}): the test depends on the text's comments or layout, which no "
                       f"candidate keeps; make it read what pxla-opt prints")

    def _hint(self, test: Test) -> str:
        if test.mode == "test":
            from pxla_mlir.mlir.reduce.evaluate import command_for

            return f" (try it: {command_for(self.args.test, self.source)}; exit 0 means interesting)"
        if test.mode == "compare":
            return " (a comparison needs results that differ)"
        return " (or change --expect-error to match one of its errors)" if self.args.expect_error else ""

    def run(self) -> int:
        from pxla_mlir.mlir.reduce.catalog import default_reductions
        from pxla_mlir.mlir.reduce.delta import Reducer
        from pxla_mlir.mlir.reduce.evaluate import Evaluator
        from pxla_mlir.mlir.reduce.progress import Progress

        module, recorded = self._module_text()
        test = self._test(recorded)
        evaluator = Evaluator(test.runner, self.args.jobs)
        try:
            printer, first, size = self._first(module, test, evaluator)
            what = f" while the test keeps {test.expecting}" if test.expecting else ""
            print(f"{PROG}: {self.source}: {size.ops} ops; reducing{what}, {evaluator.jobs} at a time",
                  file=sys.stderr, flush=True)
            progress = Progress(verbose=self.args.verbose)
            outcome = Reducer(printer, evaluator, default_reductions(), progress).run(first, size)
            self._write(outcome.text, recorded, test, outcome)
        finally:
            evaluator.close()
        counts = outcome.counts
        where = "stdout" if self.args.output == "-" else self.args.output
        print(f"{PROG}: {self.source}: {outcome.start.ops} ops -> {outcome.size.ops} ops in {outcome.seconds:.1f} s "
              f"({counts.tested} tested, {counts.repeats} repeats and {counts.invalid} invalid candidates skipped, "
              f"{outcome.rounds} rounds); written to {where}", file=sys.stderr)
        if outcome.interrupted:
            print(f"{PROG}: interrupted: {where} holds the smallest interesting module found so far", file=sys.stderr)
            return 130
        return 0

    def _write(self, text: str, recorded: Any, test: Test, outcome: Any) -> None:
        from pxla_mlir.mlir.pass_infra import reproducer

        write_output(self.args.output, text if recorded is None else reproducer.with_trailer(text, recorded))
        if self.args.emit_lit_test:
            note = (f"Reduced by pxla-mlir reduce from {os.path.basename(self.source)} ({outcome.start.ops} ops -> "
                    f"{outcome.size.ops} ops).")
            write_output(self.args.emit_lit_test, test.lit(text, note))
