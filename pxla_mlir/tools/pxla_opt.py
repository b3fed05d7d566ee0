"""pxla-opt: mlir-opt for pxla passes (and jaxlib's), with mlir-opt's flag names.

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-handoff-pipeline)' -o out.mlir

jax-free on purpose: it loads jaxlib's MLIR bindings only, so it starts fast.
User mistakes print ``file:line:col: error: ...`` and exit 1, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import io
import os
import re
import sys

from jaxlib.mlir import ir

from .. import __version__
from ..ir.context import make_context
from ..ir.diagnostics import Diagnostic, DiagnosticCollector, SourceLoc
from ..ir.nesting import NestingError, check_nesting
from ..ir.verify_diagnostics import parse_expectations, verify
from ..pass_infra import Pipeline, PipelineSyntaxError, registry
from ..pass_infra.pipeline import describe_options

PROG = "pxla-opt"
SPLIT_MARKER = re.compile(rb"^// -----", re.M)
_BUFFER_LOC = re.compile(r'loc\("-":(?=\d+:\d+\))')


def _quote(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


class UsageError(Exception):
    """A mistake on the command line: printed as ``pxla-opt: error: ...``, exit 1."""


class _ArgParser(argparse.ArgumentParser):
    def error(self, message):  # argparse would exit 2 with a usage dump
        raise UsageError(f"{message} (see {PROG} --help)")


def _flag(p, name: str, help: str, **kw):
    # mlir-opt accepts -flag and --flag alike.
    p.add_argument(f"-{name}", f"--{name}", help=help, **kw)


def build_arg_parser() -> argparse.ArgumentParser:
    p = _ArgParser(prog=PROG, description="Run pxla and jaxlib MLIR passes over MHLO (mlir-opt flags).")
    p.add_argument("input", nargs="?", default="-", help="input file ('-' for stdin, the default)")
    p.add_argument("-o", dest="output", default="-", help="output file ('-' for stdout, the default)")
    _flag(p, "pass-pipeline", "textual pipeline, e.g. 'builtin.module(pxla-verify-handoff,canonicalize)'",
          dest="pass_pipeline", default="builtin.module()")
    _flag(p, "split-input-file", "process each '// -----' chunk separately", action="store_true")
    _flag(p, "verify-diagnostics", "check diagnostics against '// expected-error ...' comments",
          action="store_true")
    for what in ("after-all", "before-all", "after-change", "after-failure", "module-scope"):
        _flag(p, f"mlir-print-ir-{what}", f"IR printing: {what.replace('-', ' ')} (stderr)",
              action="store_true")
    _flag(p, "mlir-timing", "print pass timing (stderr)", action="store_true")
    _flag(p, "mlir-pass-statistics", "print pass statistics (stderr)", action="store_true")
    _flag(p, "mlir-disable-threading", "run single-threaded", action="store_true")
    _flag(p, "mlir-print-op-generic", "print ops in generic form", action="store_true")
    _flag(p, "mlir-print-debuginfo", "print locations", action="store_true")
    _flag(p, "allow-unregistered-dialect", "accept ops of unknown dialects", action="store_true")
    _flag(p, "list-passes", "list pxla passes and pipelines with their options", action="store_true")
    _flag(p, "dump-pass-pipeline", "print the expanded pipeline (stderr)", action="store_true")
    p.add_argument("--version", action="store_true", help="print versions")
    return p


def list_passes(out) -> None:
    groups = (("Passes", registry.PASSES), ("Pass pipelines", registry.PIPELINES))
    for title, table in groups:
        print(f"{title}:", file=out)
        for arg in table:
            cls = registry.load(arg)
            print(f"  {arg:<34} {cls.summary}", file=out)
            for line in describe_options(cls):
                print(f"      {line}", file=out)


def _version_text() -> str:
    import jaxlib.version

    return f"{PROG} (pxla-mlir {__version__}) with the MLIR of jaxlib {jaxlib.version.__version__}"


def _read_input(path: str) -> bytes:
    if path == "-":
        if sys.stdin.isatty():
            print(f"{PROG}: reading MLIR from standard input (end with Ctrl-D)", file=sys.stderr)
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise UsageError(f"could not open input file '{path}': {e.strerror}") from None


def split_chunks(data: bytes, split: bool) -> list[bytes]:
    """Input chunks, each padded with newlines so that its line numbers are
    those of the original file."""
    if not split:
        return [data]
    chunks, start, line = [], 0, 0
    for m in SPLIT_MARKER.finditer(data):
        end_of_marker_line = data.find(b"\n", m.end())
        end_of_marker_line = len(data) if end_of_marker_line < 0 else end_of_marker_line + 1
        piece = data[start:m.start()]
        chunks.append(b"\n" * line + piece)
        line += piece.count(b"\n") + 1
        start = end_of_marker_line
    chunks.append(b"\n" * line + data[start:])
    return chunks


class Driver:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.buffer_name = "<stdin>" if args.input == "-" else args.input
        self.printing = any(getattr(args, f"mlir_print_ir_{w}") for w in
                            ("after_all", "before_all", "after_change", "after_failure"))
        self.ok = True

    def context(self) -> ir.Context:
        a = self.args
        return make_context(threading=not (a.mlir_disable_threading or self.printing),
                            allow_unregistered_dialects=a.allow_unregistered_dialect)

    def report(self, diags: list[Diagnostic]) -> None:
        for d in diags:
            print(d.format(self.buffer_name), file=sys.stderr)

    def pipeline(self, ctx: ir.Context) -> Pipeline:
        try:
            return Pipeline.parse(self.args.pass_pipeline, ctx)
        except PipelineSyntaxError as e:
            raise UsageError(e.format()) from None

    def run_chunk(self, data: bytes, pipeline_text: str | None) -> str | None:
        """Parses and transforms one chunk; returns the printed IR or None on failure."""
        a = self.args
        ctx = self.context()
        pipeline = Pipeline.parse(pipeline_text, ctx) if pipeline_text else self.pipeline(ctx)
        text_out = None
        with DiagnosticCollector(ctx) as diags:
            with ctx:
                try:
                    check_nesting(data)
                    module = ir.Module.parse(data)
                    pm = pipeline.pass_manager(ctx)
                    self._instrument(pm)
                    pm.run(module.operation)
                    text_out = self._print(module)
                except ir.MLIRError as e:
                    diags.add_error(e)
                    if not diags.errors:  # a failure that carried no located diagnostic
                        diags.add(Diagnostic("error", str(e).strip(), None))
                except NestingError as e:
                    diags.add(Diagnostic("error", e.message, SourceLoc("-", e.line, e.col)))
                finally:
                    pm = None  # the timing report prints when the PassManager dies
                    gc.collect()
        failed = bool(diags.errors)
        found = [_at_first_line(d, data) for d in diags.diagnostics]
        if a.verify_diagnostics:
            self._verify(data, found)
        else:
            self.report(found)
            self.ok &= not failed
        return None if failed else text_out

    def _instrument(self, pm) -> None:
        a = self.args
        if self.printing:
            # As in mlir-opt, after-change and after-failure filter the after-pass dumps.
            after_all = a.mlir_print_ir_after_all or a.mlir_print_ir_after_change or a.mlir_print_ir_after_failure
            pm.enable_ir_printing(print_before_all=a.mlir_print_ir_before_all, print_after_all=after_all,
                                  print_module_scope=a.mlir_print_ir_module_scope,
                                  print_after_change=a.mlir_print_ir_after_change,
                                  print_after_failure=a.mlir_print_ir_after_failure,
                                  enable_debug_info=a.mlir_print_debuginfo,
                                  print_generic_op_form=a.mlir_print_op_generic)
        if a.mlir_timing:
            pm.enable_timing()
        if a.mlir_pass_statistics:
            pm.enable_statistics()

    def _print(self, module: ir.Module) -> str:
        out = io.StringIO()
        module.operation.print(file=out, enable_debug_info=self.args.mlir_print_debuginfo,
                               print_generic_op_form=self.args.mlir_print_op_generic, assume_verified=True)
        text = out.getvalue()
        if self.args.mlir_print_debuginfo and self.args.input != "-":
            # The bindings parse from an unnamed buffer ("-"); name it like mlir-opt does.
            text = _BUFFER_LOC.sub(lambda m: f"loc({_quote(self.args.input)}:", text)
        return text

    def _verify(self, data: bytes, diags: list[Diagnostic]) -> None:
        expectations, malformed = parse_expectations(data.decode("utf-8", "replace"))
        for m in malformed:
            line, _, msg = m.partition(": ")
            print(f"{self.buffer_name}:{line}:1: error: {msg}", file=sys.stderr)
            self.ok = False
        for p in verify(expectations, diags):
            where = f"{self.buffer_name}:{p.line}:{p.col}" if p.line else self.buffer_name
            print(f"{where}: error: {p.message}", file=sys.stderr)
            self.ok = False

    def run(self) -> int:
        a = self.args
        ctx = self.context()
        pipeline = self.pipeline(ctx)
        if a.dump_pass_pipeline:
            print(f"Pass pipeline: {pipeline}", file=sys.stderr)
        canonical = str(pipeline)
        del ctx
        data = _read_input(a.input)
        outputs = []
        for chunk in split_chunks(data, a.split_input_file):
            text = self.run_chunk(chunk, canonical)
            if text is not None:
                outputs.append(text)
        _write_output(a.output, "// -----\n".join(outputs))
        return 0 if self.ok else 1


def _at_first_line(d: Diagnostic, data: bytes) -> Diagnostic:
    """MLIR places the implicit module of a file (or chunk) without one at
    line 0; point such diagnostics at the chunk's first line of code instead."""
    notes = tuple(_at_first_line(n, data) for n in d.notes)
    loc = d.loc
    if loc is not None and loc.file == "-" and loc.line == 0:
        lines = data.split(b"\n")
        first = next((i for i, l in enumerate(lines, 1) if l.strip() and not l.lstrip().startswith(b"//")), 1)
        loc = SourceLoc("-", first, len(lines[first - 1]) - len(lines[first - 1].lstrip()) + 1)
    return dataclasses.replace(d, loc=loc, notes=notes)


def _write_output(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        raise UsageError(f"could not write output file '{path}': {e.strerror}") from None


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_arg_parser().parse_args(argv)
        if args.version:
            print(_version_text())
            return 0
        if args.list_passes:
            list_passes(sys.stdout)
            return 0
        return Driver(args).run()
    except UsageError as e:
        print(f"{PROG}: error: {e}" if not str(e).startswith("<pass-pipeline>") else str(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as e:  # a bug of ours: say so, without a traceback
        if os.environ.get("PXLA_DEBUG"):
            raise
        print(f"{PROG}: internal error: {type(e).__name__}: {e} (set PXLA_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
