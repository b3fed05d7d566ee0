"""pxla-opt's run over its input: the input read and split into chunks,
each parsed, run through the pipeline and printed, with its diagnostics
located in the input (or checked against its ``expected-*`` comments)."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import io
import re
import sys
from typing import cast

from jaxlib.mlir import ir, passmanager

from pxla_mlir.mlir.cli.dump_filter import DumpFilter, split_pass_names
from pxla_mlir.mlir.cli.opt_flags import DEFAULT_SPLIT_MARKER, PROG, UsageError
from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.mlir.core.diagnostics import Diagnostic, DiagnosticCollector, SourceLoc, location_of
from pxla_mlir.mlir.core.nesting_depth import NestingError, check_nesting
from pxla_mlir.mlir.core.verify_diagnostics import parse_expectations, verify
from pxla_mlir.mlir.pass_infra import Pipeline, PipelineSyntaxError, jaxlib_passes, plugins, reproducer, statistics
from pxla_mlir.mlir.pass_infra.options import split_top_level
from pxla_mlir.mlir.pass_infra.pipeline_syntax import ROOT_ANCHOR
from pxla_mlir.mlir.pass_infra.registry import REGISTRY
from pxla_mlir.mlir.support.files import write_atomically

BYTECODE_MAGIC = b"ML\xefR"
_BUFFER_LOC = re.compile(r'loc\("-":(?=\d+:\d+\))')


def _quote(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


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


def split_chunks(data: bytes, marker: str | None) -> list[bytes]:
    """Input chunks, each padded with newlines so that its line numbers are
    those of the original file. A line starting with ``marker`` ends a chunk;
    ``None``: no splitting."""
    if marker is None:
        return [data]
    chunks, start, line = [], 0, 0
    for m in re.finditer(rb"^" + re.escape(marker.encode()), data, re.M):
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
        self.print_before = split_pass_names(args.mlir_print_ir_before)
        self.print_after = split_pass_names(args.mlir_print_ir_after)
        self.printing = bool(self.print_before or self.print_after) or any(
            getattr(args, f"mlir_print_ir_{w}") for w in ("after_all", "before_all", "after_change", "after_failure"))
        self.ok = True

    def context(self) -> ir.Context:
        a = self.args
        return make_context(threading=not (a.mlir_disable_threading or self.printing),
                            allow_unregistered_dialects=a.allow_unregistered_dialect)

    def report(self, diags: list[Diagnostic], source: bytes | None) -> None:
        for d in diags:
            print(d.format(self.buffer_name, source), file=sys.stderr)

    def pipeline(self, ctx: ir.Context) -> Pipeline:
        try:
            return Pipeline.parse(self.args.pass_pipeline or f"{ROOT_ANCHOR}()", ctx)
        except PipelineSyntaxError as e:
            raise UsageError(e.format()) from None

    def _parse(self, data: bytes, pipeline: Pipeline):
        """The module (or with --no-implicit-module, the one top-level op) to run on, and its owner."""
        if not self.args.no_implicit_module or data.startswith(BYTECODE_MAGIC):
            module = ir.Module.parse(data)
            return module.operation, module
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
            raise _InputError(f"byte 0x{data[e.start]:02x} is not UTF-8 (MLIR text is UTF-8)",
                              SourceLoc("-", line, col)) from None
        op = ir.Operation.parse(text).operation
        if pipeline.steps and op.name != ROOT_ANCHOR:
            raise _InputError(f"the top-level operation is '{op.name}', but the pass pipeline runs on "
                              f"'{ROOT_ANCHOR}'; wrap the input in a module or drop --no-implicit-module",
                              location_of(op.location))
        return op, op

    def run_chunk(self, data: bytes, pipeline: Pipeline) -> str | bytes | None:
        """Parses and transforms one chunk (in a context of its own: the pipeline is a value, made once);
        returns the printed IR or None on failure."""
        a = self.args
        bytecode = data.startswith(BYTECODE_MAGIC)
        ctx = self.context()
        out = None
        pipeline_failed = False
        reproducer_text = data.decode("utf-8", "replace")  # text keeps its lines, so the errors keep their places
        with DiagnosticCollector(ctx) as diags, ctx:
            try:
                if not bytecode:  # the nesting limit guards the text parser's stack
                    check_nesting(data)
                op, owner = self._parse(data, pipeline)
                verify = "every-pass" if a.verify_each else "pxla-changes"
                pm = pipeline.pass_manager(ctx, verify)
                self._instrument(pm)
                if pipeline.steps:
                    if bytecode and a.mlir_pass_pipeline_crash_reproducer:
                        reproducer_text = cast(str, op.get_asm(enable_debug_info=True))  # text: binary=False
                    pipeline_failed = True  # until it has run and the module verifies
                    with statistics.collecting() as counted:
                        try:
                            self._run(pm, op)
                        finally:
                            if a.mlir_pass_statistics:  # (jaxlib's own report would be empty)
                                print(statistics.report(pipeline.steps, counted, _pass_names), file=sys.stderr)
                    if not pipeline.verified_at_end(verify):
                        op.verify()  # a jaxlib pass ran last: the printer must not see invalid IR
                    pipeline_failed = False
                out = self._print(op)
            except ir.MLIRError as e:
                diags.add_error(e)
                if not diags.errors:  # a failure that carried no located diagnostic
                    diags.add(Diagnostic("error", str(e).strip(), None))
            except NestingError as e:
                diags.add(Diagnostic("error", e.message, SourceLoc("-", e.line, e.col)))
            except _InputError as e:
                diags.add(Diagnostic("error", e.message, e.loc))
            finally:
                pm = op = owner = None  # noqa: F841 (dropped: the timing report prints when the PassManager dies)
                if a.mlir_timing or a.mlir_pass_statistics:
                    gc.collect()  # a collection costs about as much as a small module's passes
        failed = bool(diags.errors)
        if bytecode:  # no source lines to point at: name the file only
            found = [_without_buffer_loc(d) for d in diags.diagnostics]
        else:
            found = [_at_first_line(d, data) for d in diags.diagnostics]
        if a.verify_diagnostics:
            self._verify(data, found)
        else:
            self.report(found, None if bytecode else data)
            self.ok &= not failed
        if failed and pipeline_failed and a.mlir_pass_pipeline_crash_reproducer:
            self._write_reproducer(reproducer_text, pipeline)
        return None if failed else out

    def _write_reproducer(self, text: str, pipeline: Pipeline) -> None:
        a = self.args
        path = a.mlir_pass_pipeline_crash_reproducer
        recorded = reproducer.Recorded(str(pipeline), verify_each=a.verify_each,
                                       disable_threading=a.mlir_disable_threading, plugins=pipeline.plugins())
        written = io.StringIO()
        reproducer.write(written, text, recorded)
        try:
            write_atomically(path, written.getvalue())
        except OSError as e:
            message = f"--mlir-pass-pipeline-crash-reproducer: could not write '{path}': {e.strerror}"
            raise UsageError(message) from None
        print(f"{PROG}: wrote a reproducer to {path}; replay it with: {reproducer.rerun_command(path)}",
              file=sys.stderr)

    def _run(self, pm: passmanager.PassManager, op: ir.Operation) -> None:
        a = self.args
        if not (self.print_before or self.print_after):
            pm.run(op)
            return
        before = None if a.mlir_print_ir_before_all else self.print_before
        after = None if a.mlir_print_ir_after_all else self.print_after or None
        with DumpFilter(before, after):
            pm.run(op)

    def _instrument(self, pm: passmanager.PassManager) -> None:
        a = self.args
        if self.printing:
            # As in mlir-opt, after-change and after-failure filter the after-pass dumps.
            after_all = (a.mlir_print_ir_after_all or a.mlir_print_ir_after_change or a.mlir_print_ir_after_failure
                         or bool(self.print_after))
            pm.enable_ir_printing(print_before_all=a.mlir_print_ir_before_all or bool(self.print_before),
                                  print_after_all=after_all,
                                  print_module_scope=a.mlir_print_ir_module_scope,
                                  print_after_change=a.mlir_print_ir_after_change,
                                  print_after_failure=a.mlir_print_ir_after_failure,
                                  large_elements_limit=a.mlir_elide_elementsattrs_if_larger,
                                  enable_debug_info=a.mlir_print_debuginfo,
                                  print_generic_op_form=a.mlir_print_op_generic)
        if a.mlir_timing:
            pm.enable_timing()

    def _print(self, op: ir.Operation) -> str | bytes:
        a = self.args
        if a.emit_bytecode:
            out = io.BytesIO()
            op.write_bytecode(out)
            return out.getvalue()
        out = io.StringIO()
        op.print(file=out, enable_debug_info=a.mlir_print_debuginfo, print_generic_op_form=a.mlir_print_op_generic,
                 use_local_scope=a.mlir_print_local_scope, large_elements_limit=a.mlir_elide_elementsattrs_if_larger,
                 assume_verified=True)
        text = out.getvalue()
        if a.no_implicit_module and op.name != ROOT_ANCHOR:
            text += "\n"  # an op printed alone has no final newline
        if a.mlir_print_debuginfo and a.input != "-":
            # The bindings parse from an unnamed buffer ("-"); name it like mlir-opt does.
            text = _BUFFER_LOC.sub(lambda m: f"loc({_quote(a.input)}:", text)
        return text

    def _verify(self, data: bytes, diags: list[Diagnostic]) -> None:
        expectations, malformed = parse_expectations(data.decode("utf-8", "replace"))
        problems = [Diagnostic("error", msg, SourceLoc("-", int(line), 1))
                    for line, _, msg in (m.partition(": ") for m in malformed)]
        # A mismatch has a column wherever it has a line.
        problems += [Diagnostic("error", p.message, SourceLoc("-", p.line, cast(int, p.col)) if p.line else None)
                     for p in verify(expectations, diags)]
        self.report(problems, data)
        self.ok &= not problems

    def check_print_names(self, ctx: ir.Context) -> None:
        for flag, names in (("before", self.print_before), ("after", self.print_after)):
            for name in names:
                known = name in REGISTRY.passes or REGISTRY.is_registered(name)
                kind = "pipeline" if name in REGISTRY.pipelines else "pass" if known else \
                    jaxlib_passes.kind(name, ctx)
                if kind is None:
                    raise UsageError(f"--mlir-print-ir-{flag}: unknown pass '{name}' ({PROG} --list-passes lists them)")
                if kind == "pipeline":
                    raise UsageError(f"--mlir-print-ir-{flag}: '{name}' is a pipeline; name one of its passes "
                                     f"(--dump-pass-pipeline shows them)")

    def recorded_pipeline(self, data: bytes) -> bytes:
        """--run-reproducer: takes the pipeline (and --verify-each) from the input's trailer; returns the module."""
        a = self.args
        if a.pass_pipeline is not None:
            raise UsageError("--run-reproducer runs the pipeline the reproducer records; drop -p/--pass-pipeline "
                             "and the pass flags (or drop --run-reproducer to run another pipeline on it)")
        if a.split_input_file is not None:
            raise UsageError("--run-reproducer reads one module; it cannot be combined with --split-input-file")
        module, recorded = reproducer.split(data)
        if recorded is None:
            raise UsageError(f"{self.buffer_name} records no pipeline: a reproducer ends with "
                             f"{{-# external_resources: {{mlir_reproducer: {{pipeline: \"...\"}}}} #-}}; "
                             f"give the pipeline with -p PIPELINE instead of --run-reproducer")
        for spec in recorded.plugins:  # the plugins whose passes the pipeline runs
            try:
                plugins.load_plugin(spec)
            except plugins.PluginError as e:
                raise UsageError(f"{self.buffer_name} records the pass plugin '{spec}', which does not load: {e}") \
                    from None
        a.pass_pipeline = recorded.pipeline
        a.verify_each = a.verify_each or recorded.verify_each
        a.mlir_disable_threading = a.mlir_disable_threading or recorded.disable_threading
        return module

    def run(self) -> int:
        a = self.args
        if a.emit_bytecode and a.split_input_file is not None:
            raise UsageError("--emit-bytecode writes one module; it cannot be combined with --split-input-file")
        if a.emit_bytecode and a.output == "-" and sys.stdout.isatty():
            raise UsageError("--emit-bytecode would write binary data to the terminal; give -o FILE or redirect "
                             "the output")
        if a.split_input_file == "":
            raise UsageError(f"--split-input-file= needs a marker, e.g. --split-input-file='{DEFAULT_SPLIT_MARKER}'")
        data = None
        if a.run_reproducer:
            data = self.recorded_pipeline(_read_input(a.input))
        ctx = self.context()
        pipeline = self.pipeline(ctx)
        self.check_print_names(ctx)
        if a.dump_pass_pipeline:
            print(f"Pass pipeline: {pipeline}", file=sys.stderr)
        del ctx
        if data is None:
            data = reproducer.split(_read_input(a.input))[0]  # a reproducer's trailer is pxla-opt's, not MLIR's
        if data.startswith(BYTECODE_MAGIC) and a.split_input_file is not None:
            raise UsageError(f"{self.buffer_name} is MLIR bytecode; --split-input-file needs MLIR text")
        outputs = []
        for chunk in split_chunks(data, a.split_input_file):
            out = self.run_chunk(chunk, pipeline)
            if out is not None:
                outputs.append(out)
        if self.ok or a.output == "-":  # a file only when the run succeeds, as mlir-opt keeps its -o
            if a.emit_bytecode:
                _write_output(a.output, outputs[0] if outputs else b"")
            else:
                _write_output(a.output, "".join(f"{t}{a.output_split_marker}\n" if i < len(outputs) - 1 else t
                                                for i, t in enumerate(outputs)))
        return 0 if self.ok else 1


class _InputError(Exception):
    """An input pxla-opt refuses before MLIR sees it, with where."""

    def __init__(self, message: str, loc: SourceLoc | None):
        self.message, self.loc = message, loc
        super().__init__(message)


def _without_buffer_loc(d: Diagnostic) -> Diagnostic:
    notes = tuple(_without_buffer_loc(n) for n in d.notes)
    loc = None if d.loc is not None and d.loc.file == "-" else d.loc
    return dataclasses.replace(d, loc=loc, notes=notes)


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


def _pass_names(text: str) -> list[str]:
    """jaxlib's passes in a pipeline step's text, one element each, by name (``func.func(cse)`` as one)."""
    return [element.split("{", 1)[0] for element in split_top_level(text, ",")]


def _write_output(path: str, out: str | bytes) -> None:
    if path == "-":
        if isinstance(out, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(out)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(out)
            sys.stdout.flush()
        return
    try:
        write_atomically(path, out)
    except OSError as e:
        raise UsageError(f"could not write output file '{path}': {e.strerror}") from None
