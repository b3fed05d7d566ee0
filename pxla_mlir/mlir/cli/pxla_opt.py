"""pxla-opt: mlir-opt for pxla passes (and jaxlib's), with mlir-opt's flag names.

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-handoff-pipeline)' -o out.mlir
    pxla-opt in.mlir -p 'builtin.module(pxla-expand-shard,canonicalize)'
    pxla-opt in.mlir -pxla-expand-unshard='strategy=all-reduce' -canonicalize  # a flag per pass, run in order
    pxla-opt --run-reproducer /tmp/pxla_repro_abc.mlir                         # a failed pipeline, again

jax-free on purpose: it loads jaxlib's MLIR bindings only, so it starts fast.
Errors in the input print ``file:line:col: error: ...`` (with the source line
and a caret under the column) and exit 1; mistakes on the command line (flags,
the pipeline) print one ``pxla-opt: error: ...`` and exit 2, as pxla-mlir's
do; never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import gc
import io
import os
import re
import sys

from jaxlib.mlir import ir

from pxla_mlir import __version__
from pxla_mlir.mlir.cli.argparsing import ExactArgumentParser
from pxla_mlir.mlir.cli.dump_filter import DumpFilter, split_pass_names
from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.mlir.core.diagnostics import Diagnostic, DiagnosticCollector, SourceLoc, location_of
from pxla_mlir.mlir.core.nesting_depth import NestingError, check_nesting
from pxla_mlir.mlir.core.verify_diagnostics import parse_expectations, verify
from pxla_mlir.mlir.pass_infra import Pipeline, PipelineSyntaxError, jaxlib_passes, registry, reproducer
from pxla_mlir.mlir.pass_infra.pipeline import ROOT_ANCHOR, describe_options, pass_element

PROG = "pxla-opt"
DEFAULT_SPLIT_MARKER = "// -----"
BYTECODE_MAGIC = b"ML\xefR"
_BUFFER_LOC = re.compile(r'loc\("-":(?=\d+:\d+\))')
_SPLIT_FLAGS = ("-split-input-file", "--split-input-file")
_BOOL_FLAGS = ("-verify-each", "--verify-each")
#: A word that reads as a flag (-verify-diag, -pxla-expand-shards), not as -o or -p with its value joined on.
_FLAG_LIKE = re.compile(r"--?[a-z][a-z0-9]*(?:-[a-z0-9]+)+(?:=.*)?", re.S)
#: Commands that run as written, in this order, in an empty directory ('pxla-mlir example NAME' copies the files
#: they read); '# exit N' marks a documented failure. tests/tools/test_help_examples.py runs every one.
EXAMPLES = [
    "pxla-mlir example per_device_psum",
    "pxla-opt per_device_psum.mlir -p 'builtin.module(pxla-handoff-pipeline)' -o handoff.mlir",
    "pxla-opt handoff.mlir -p 'builtin.module(pxla-verify-handoff)'",
    "pxla-mlir example nested_reduction",
    "pxla-mlir emit nested_reduction.py:two_level_sum --stage pxla -o nested.mlir",
    "pxla-opt nested.mlir -stablehlo-legalize-to-hlo -pxla-expand-unshard='strategy=all-reduce' -canonicalize",
    "PXLA_REPRO_DIR=repro pxla-mlir emit nested_reduction.py:two_level_sum --pipeline "
    "'builtin.module(pxla-verify-handoff)'   # exit 2; saves a reproducer",
    "pxla-opt --run-reproducer repro/pxla_repro_*.mlir   # exit 1: the same errors, again",
]


def _quote(path: str) -> str:
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


#: The exit status of a mistake on the command line (argparse's and pxla-mlir's); 1 is an error in the input.
USAGE_EXIT = 2


class UsageError(Exception):
    """A mistake on the command line: printed as ``pxla-opt: error: ...``, exit :data:`USAGE_EXIT`."""


class _ArgParser(ExactArgumentParser):
    def error(self, message):  # argparse would exit 2 with a usage dump
        raise UsageError(f"{message} (see {PROG} --help)")

    def format_help(self) -> str:  # as mlir-opt's --help, it lists every pass and pipeline
        out = io.StringIO()
        list_passes(out)
        return super().format_help() + "\n" + out.getvalue()


def _flag(p, name: str, help: str, **kw):
    # mlir-opt accepts -flag and --flag alike.
    p.add_argument(f"-{name}", f"--{name}", help=help, **kw)


def _non_negative_int(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return int(text)


def build_arg_parser() -> argparse.ArgumentParser:
    p = _ArgParser(prog=PROG, description="Run pxla and jaxlib MLIR passes over MHLO (mlir-opt flags).\n\n"
                                          "Each pass and pipeline listed below is also a flag of its own, run in "
                                          "the order given:\n  -NAME, or -NAME='OPTION=VALUE ...' for its options",
                   epilog="examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES),
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", nargs="?", default="-", help="input file, MLIR text or bytecode ('-' for stdin, the default)")
    p.add_argument("-o", dest="output", default="-", help="output file ('-' for stdout, the default)")
    p.add_argument("-p", "-pass-pipeline", "--pass-pipeline", dest="pass_pipeline", metavar="PIPELINE",
                   help="textual pipeline, e.g. 'builtin.module(pxla-verify-handoff,canonicalize)' (default: none)")
    _flag(p, "run-reproducer", "run the pipeline the input records in its trailer, {-# external_resources: "
                               "{mlir_reproducer: {pipeline: ...}} #-} (a reproducer that a failing pipeline saved)",
          action="store_true")
    _flag(p, "mlir-pass-pipeline-crash-reproducer", "when the pipeline fails, write the module it got and the "
                                                    "pipeline to FILE, as mlir-opt does (replay: pxla-opt "
                                                    "--run-reproducer FILE)", metavar="FILE")
    _flag(p, "split-input-file", f"process each chunk separately; a line starting with MARKER ends a chunk "
                                 f"(--split-input-file alone: '{DEFAULT_SPLIT_MARKER}')", metavar="[=MARKER]",
          dest="split_input_file", default=None)
    _flag(p, "output-split-marker", f"the line written between the outputs of chunks (default '{DEFAULT_SPLIT_MARKER}')",
          metavar="MARKER", default=DEFAULT_SPLIT_MARKER)
    _flag(p, "verify-diagnostics", "check diagnostics against '// expected-error ...' comments",
          action="store_true")
    _flag(p, "verify-each", "run the verifier after every pass, jaxlib's too (default: after each pxla pass that "
                            "may change the module, and at the end after a jaxlib pass; --verify-each=false is the "
                            "default spelled out)",
          action="store_true")
    _flag(p, "no-implicit-module", "do not wrap the input in a module: it must be one top-level operation",
          action="store_true")
    for what in ("after-all", "before-all", "after-change", "after-failure", "module-scope"):
        _flag(p, f"mlir-print-ir-{what}", f"IR printing: {what.replace('-', ' ')} (stderr)",
              action="store_true")
    for when in ("before", "after"):
        _flag(p, f"mlir-print-ir-{when}", f"print the IR {when} these passes (stderr; comma-separated, repeatable)",
              metavar="PASS[,PASS...]", action="append")
    _flag(p, "mlir-timing", "print pass timing (stderr)", action="store_true")
    _flag(p, "mlir-pass-statistics", "print pass statistics (stderr)", action="store_true")
    _flag(p, "mlir-disable-threading", "run single-threaded", action="store_true")
    _flag(p, "mlir-print-op-generic", "print ops in generic form", action="store_true")
    _flag(p, "mlir-print-debuginfo", "print locations", action="store_true")
    _flag(p, "mlir-print-local-scope", "print types and attributes inline, not as aliases", action="store_true")
    _flag(p, "mlir-elide-elementsattrs-if-larger", "print elements attributes with more than N elements as "
                                                   "dense_resource<__elided__>", metavar="N", type=_non_negative_int)
    _flag(p, "emit-bytecode", "write MLIR bytecode instead of text", action="store_true")
    _flag(p, "allow-unregistered-dialect", "accept ops of unknown dialects", action="store_true")
    _flag(p, "list-passes", "list pxla passes and pipelines with their options, and jaxlib's", action="store_true")
    _flag(p, "dump-pass-pipeline", "print the expanded pipeline (stderr)", action="store_true")
    p.add_argument("--version", action="store_true", help="print versions")
    return p


def _columns(names, out, indent: int = 2, width: int = 110) -> None:
    line = " " * indent
    for name in names:
        if len(line) + len(name) + 2 > width and line.strip():
            print(line.rstrip(", "), file=out)
            line = " " * indent
        line += name + ", "
    if line.strip():
        print(line.rstrip(", "), file=out)


def list_passes(out) -> None:
    groups = (("Passes", registry.PASSES), ("Pass pipelines", registry.PIPELINES))
    for title, table in groups:
        print(f"{title}:", file=out)
        for arg in table:
            cls = registry.load(arg)
            assert cls is not None  # every listed name loads (tests/mlir/pass_infra/test_registry.py)
            print(f"  {arg:<34} {cls.summary}", file=out)
            for line in describe_options(cls):
                print(f"      {line}", file=out)
    print(f"jaxlib's passes (jaxlib {jaxlib_passes.JAXLIB_VERSION}, which does not expose their descriptions):",
          file=out)
    _columns(jaxlib_passes.MODULE_PASSES, out)
    print("jaxlib's passes on func.func (nest them: func.func(NAME)):", file=out)
    _columns(jaxlib_passes.FUNC_PASSES, out)
    print("jaxlib's pass pipelines:", file=out)
    _columns(jaxlib_passes.PIPELINES, out)


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


def _split_marker_argv(argv: list[str]) -> list[str]:
    """mlir-opt's --split-input-file takes its marker only as ``=MARKER``."""
    return [f"--split-input-file={DEFAULT_SPLIT_MARKER}" if a in _SPLIT_FLAGS else a for a in argv]


def _bool_flags_argv(argv: list[str]) -> list[str]:
    """mlir-opt's ``--verify-each=true|false`` (a value only after '=') as a plain flag or none."""
    out = []
    for a in argv:
        name, eq, value = a.partition("=")
        if eq and name in _BOOL_FLAGS:
            if value.lower() not in ("true", "1", "false", "0"):
                raise UsageError(f"argument {name}: expected true or false, got {value!r}")
            if value.lower() in ("true", "1"):
                out.append(name)
            continue
        out.append(a)
    return out


def _pass_names() -> dict[str, str]:
    """Every registered pass and pipeline, with where it runs: "module", or "func" (jaxlib's passes on func.func)."""
    names = dict.fromkeys([*registry.PASSES, *registry.PIPELINES, *jaxlib_passes.MODULE_PASSES,
                           *jaxlib_passes.PIPELINES], "module")
    names.update(dict.fromkeys(jaxlib_passes.FUNC_PASSES, "func"))
    return names


def _flags_of(parser: argparse.ArgumentParser) -> tuple[set[str], set[str]]:
    """The parser's option strings, and those of them that take a value in the next argument."""
    flags = set(parser._option_string_actions)
    valued = {f for f, action in parser._option_string_actions.items() if action.nargs != 0}
    return flags, valued


def pass_flags_argv(argv: list[str], parser: argparse.ArgumentParser) -> tuple[list[str], list[str]]:
    """mlir-opt's flag per pass: ``-pxla-expand-shard -canonicalize`` runs those passes in that order, and
    ``-NAME='OPTION=VALUE ...'`` gives one its options. Returns the other arguments, and the pipeline elements
    the pass flags make (a pass on func.func nested in it)."""
    flags, valued = _flags_of(parser)
    names = _pass_names()
    rest, elements = [], []
    taken = False  # this argument is the value of the flag before it
    for a in argv:
        if taken or a == "-" or not a.startswith("-") or a.split("=", 1)[0] in flags:
            rest.append(a)
            taken = not taken and a in valued
            continue
        name, eq, options = a.lstrip("-").partition("=")
        if name not in names:
            # Not '-oFILE' or '-pPIPELINE' but a misspelled flag or pass; '-pxla_expand_shard' is no '-p' either.
            if _FLAG_LIKE.fullmatch(a) or _with_underscores(name, names, flags):
                raise UsageError(_unknown_flag([a], parser))
            rest.append(a)
            continue
        if eq and not options.strip():
            raise UsageError(f"{a}: give the pass options after '=', e.g. -{name}='OPTION=VALUE', or none")
        try:
            element = pass_element(name, options.strip()) if eq else name
        except PipelineSyntaxError as e:
            raise UsageError(f"{a}: {e.message} (give each pass its own flag, e.g. -cse, or the whole pipeline "
                             f"with -p)") from None
        elements.append(f"func.func({element})" if names[name] == "func" else element)
    return rest, elements


def _with_underscores(name: str, names, flags) -> bool:
    """Whether ``name`` is a pass or flag spelled with '_' for '-' (MLIR's names use '-')."""
    hyphenated = name.replace("_", "-")
    return hyphenated != name and (hyphenated in names or f"-{hyphenated}" in flags or f"--{hyphenated}" in flags)


def _unknown_flag(unknown: list[str], parser: argparse.ArgumentParser) -> str:
    """The message for the arguments argparse did not take, with the flag or pass spelled most like the first
    (mlir-opt's "did you mean" on a line of its own)."""
    message = f"unrecognized arguments: {' '.join(unknown)} (see {PROG} --help)"
    arg = unknown[0]
    if not arg.startswith("-") or arg == "-":
        return message
    name = arg.lstrip("-").split("=", 1)[0]
    flags = {f.lstrip("-"): f for f in _flags_of(parser)[0] if len(f) > 2}
    known = [*flags, *_pass_names()]
    hyphenated = name.replace("_", "-")
    close = [hyphenated] if hyphenated in known else difflib.get_close_matches(name, known, n=1)
    if not close:
        return message
    dashes = "--" if arg.startswith("--") else "-"
    return f"{message}\n{PROG}: did you mean '{dashes}{close[0]}'?"


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

    def run_chunk(self, data: bytes, pipeline_text: str | None) -> str | bytes | None:
        """Parses and transforms one chunk; returns the printed IR or None on failure."""
        a = self.args
        bytecode = data.startswith(BYTECODE_MAGIC)
        ctx = self.context()
        pipeline = Pipeline.parse(pipeline_text, ctx) if pipeline_text else self.pipeline(ctx)
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
                        reproducer_text = ir_utils.asm_text(op, debug_info=True)
                    pipeline_failed = True  # until it has run and the module verifies
                    self._run(pm, op)
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
                                       disable_threading=a.mlir_disable_threading)
        try:
            with open(path, "w", encoding="utf-8") as f:
                reproducer.write(f, text, recorded)
        except OSError as e:
            message = f"--mlir-pass-pipeline-crash-reproducer: could not write '{path}': {e.strerror}"
            raise UsageError(message) from None
        print(f"{PROG}: wrote a reproducer to {path}; replay it with: {reproducer.rerun_command(path)}",
              file=sys.stderr)

    def _run(self, pm, op) -> None:
        a = self.args
        if not (self.print_before or self.print_after):
            pm.run(op)
            return
        before = None if a.mlir_print_ir_before_all else self.print_before
        after = None if a.mlir_print_ir_after_all else self.print_after or None
        with DumpFilter(before, after):
            pm.run(op)

    def _instrument(self, pm) -> None:
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
        if a.mlir_pass_statistics:
            pm.enable_statistics()

    def _print(self, op) -> str | bytes:
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
        problems += [Diagnostic("error", p.message, SourceLoc("-", p.line, p.col) if p.line and p.col is not None else None)
                     for p in verify(expectations, diags)]
        self.report(problems, data)
        self.ok &= not problems

    def check_print_names(self, ctx: ir.Context) -> None:
        for flag, names in (("before", self.print_before), ("after", self.print_after)):
            for name in names:
                kind = "pipeline" if name in registry.PIPELINES else "pass" if name in registry.PASSES else \
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
        canonical = str(pipeline)
        del ctx
        if data is None:
            data = reproducer.split(_read_input(a.input))[0]  # a reproducer's trailer is pxla-opt's, not MLIR's
        if data.startswith(BYTECODE_MAGIC) and a.split_input_file is not None:
            raise UsageError(f"{self.buffer_name} is MLIR bytecode; --split-input-file needs MLIR text")
        outputs = []
        for chunk in split_chunks(data, a.split_input_file):
            out = self.run_chunk(chunk, canonical)
            if out is not None:
                outputs.append(out)
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
        with open(path, "wb" if isinstance(out, bytes) else "w") as f:
            f.write(out)
    except OSError as e:
        raise UsageError(f"could not write output file '{path}': {e.strerror}") from None


def _end_of_flags(argv: list[str]) -> tuple[list[str], list[str]]:
    """The arguments before ``--`` and the rest from it on: after ``--`` every argument is a file name, even
    ``-cse`` (the mlir-opt and argparse convention), so no flag rewriting may look at them."""
    if "--" not in argv:
        return argv, []
    at = argv.index("--")
    return argv[:at], argv[at:]


def main(argv: list[str] | None = None) -> int:
    try:
        flags, operands = _end_of_flags(sys.argv[1:] if argv is None else list(argv))
        flags = _bool_flags_argv(_split_marker_argv(flags))
        parser = build_arg_parser()
        flags, pass_flags = pass_flags_argv(flags, parser)
        args, unknown = parser.parse_known_args(flags + operands)
        if unknown:
            raise UsageError(_unknown_flag(unknown, parser))
        if pass_flags:
            if args.pass_pipeline is not None:
                raise UsageError(f"give the passes either as flags ({' '.join('-' + e for e in pass_flags[:2])} ...) "
                                 f"or as -p/--pass-pipeline, not both")
            args.pass_pipeline = f"{ROOT_ANCHOR}({','.join(pass_flags)})"
        if args.version:
            print(_version_text())
            return 0
        if args.list_passes:
            list_passes(sys.stdout)
            return 0
        return Driver(args).run()
    except UsageError as e:
        print(f"{PROG}: error: {e}" if not str(e).startswith("<pass-pipeline>") else str(e), file=sys.stderr)
        return USAGE_EXIT
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
