"""pxla-opt's command line: mlir-opt's flags, a flag per pass, and the
help, which lists every pass and pipeline; a mistake in it is a
:class:`UsageError`. :mod:`.pxla_opt` reads it, :mod:`.opt_driver` runs
what it asks for."""

from __future__ import annotations

import argparse
import difflib
import io
import re
from collections.abc import Sequence
from typing import Any, TextIO

from pxla_mlir.mlir.cli.argparsing import ExactArgumentParser, Once
from pxla_mlir.mlir.pass_infra import PipelineSyntaxError, jaxlib_passes, plugins
from pxla_mlir.mlir.pass_infra.pipeline import describe_options
from pxla_mlir.mlir.pass_infra.pipeline_syntax import pass_element
from pxla_mlir.mlir.pass_infra.registry import REGISTRY
from pxla_mlir.version import __version__

PROG = "pxla-opt"
DEFAULT_SPLIT_MARKER = "// -----"
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


#: The exit status of a mistake on the command line (argparse's and pxla-mlir's); 1 is an error in the input.
USAGE_EXIT = 2


class UsageError(Exception):
    """A mistake on the command line: printed as ``pxla-opt: error: ...``, exit :data:`USAGE_EXIT`."""


class _ArgParser(ExactArgumentParser):
    def error(self, message: str):  # argparse would exit 2 with a usage dump
        raise UsageError(f"{message} (see {PROG} --help)")

    def format_help(self) -> str:  # as mlir-opt's --help, it lists every pass and pipeline
        out = io.StringIO()
        list_passes(out)
        return super().format_help() + "\n" + out.getvalue()


def _flag(p: argparse.ArgumentParser, name: str, help: str, **kw: Any) -> None:
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
    p.add_argument("-o", dest="output", default="-", action=Once,
                   help="output file ('-' for stdout, the default), written only when the run succeeds")
    p.add_argument("-p", "-pass-pipeline", "--pass-pipeline", dest="pass_pipeline", metavar="PIPELINE", action=Once,
                   help="textual pipeline, e.g. 'builtin.module(pxla-verify-handoff,canonicalize)' (default: none; "
                        "one pipeline: put every pass in it)")
    _flag(p, "load-pass-plugin", "load the passes of FILE.py or of a dotted module before the pipeline is read "
                                 "(repeatable); they run as -NAME or in -p, as pxla's own do",
          metavar="FILE.py|MODULE", action="append", default=[])
    _flag(p, "run-reproducer", "run the pipeline the input records in its trailer, {-# external_resources: "
                               "{mlir_reproducer: {pipeline: ...}} #-} (a reproducer that a failing pipeline saved)",
          action="store_true")
    _flag(p, "mlir-pass-pipeline-crash-reproducer", "when the pipeline fails, write the module it got and the "
                                                    "pipeline to FILE, as mlir-opt does (replay: pxla-opt "
                                                    "--run-reproducer FILE)", metavar="FILE", action=Once)
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


def _columns(names: Sequence[str], out: TextIO, indent: int = 2, width: int = 110) -> None:
    line = " " * indent
    for name in names:
        if len(line) + len(name) + 2 > width and line.strip():
            print(line.rstrip(", "), file=out)
            line = " " * indent
        line += name + ", "
    if line.strip():
        print(line.rstrip(", "), file=out)


def list_passes(out: TextIO) -> None:
    groups = (("Passes", REGISTRY.passes), ("Pass pipelines", REGISTRY.pipelines))
    for title, table in groups:
        print(f"{title}:", file=out)
        for arg in table:
            cls = REGISTRY.load(arg)
            assert cls is not None  # arg is a name of the registry's own table
            print(f"  {arg:<34} {cls.summary}", file=out)
            for line in describe_options(cls):
                print(f"      {line}", file=out)
    plugins.read_entry_points()
    registered = REGISTRY.registered()
    if registered:
        print("Plugin passes:", file=out)
        for arg, cls in registered.items():
            print(f"  {arg:<34} {cls.summary} [plugin {REGISTRY.source(arg) or '?'}]", file=out)
            for line in describe_options(cls):
                print(f"      {line}", file=out)
    for broken in REGISTRY.broken:
        print(f"warning: installed pass plugin {broken.label} did not load: {broken.error}", file=out)
    print(f"jaxlib's passes ({_jaxlib_list()}; jaxlib does not expose their descriptions):", file=out)
    _columns(jaxlib_passes.MODULE_PASSES, out)
    print("jaxlib's passes on func.func (nest them: func.func(NAME)):", file=out)
    _columns(jaxlib_passes.FUNC_PASSES, out)
    print("jaxlib's pass pipelines:", file=out)
    _columns(jaxlib_passes.PIPELINES, out)


def _jaxlib_list() -> str:
    """Which jaxlib is installed, and which release's generated list names its passes when that is another."""
    import jaxlib.version

    installed = jaxlib.version.__version__
    if installed == jaxlib_passes.JAXLIB_VERSION:
        return f"jaxlib {installed}, installed"
    return (f"jaxlib {installed} is installed; listed from the generated list of jaxlib "
            f"{jaxlib_passes.JAXLIB_VERSION}, the nearest release listed")


def version_text() -> str:
    import jaxlib.version

    return f"{PROG} (pxla-mlir {__version__}) with the MLIR of jaxlib {jaxlib.version.__version__}"


def split_marker_argv(argv: list[str]) -> list[str]:
    """mlir-opt's --split-input-file takes its marker only as ``=MARKER``."""
    return [f"--split-input-file={DEFAULT_SPLIT_MARKER}" if a in _SPLIT_FLAGS else a for a in argv]


def bool_flags_argv(argv: list[str]) -> list[str]:
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
    names = dict.fromkeys([*REGISTRY.names(), *jaxlib_passes.MODULE_PASSES,
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
        if name not in names and plugins.read_entry_points():  # an installed plugin's pass, perhaps
            names = _pass_names()
        if name not in names:
            # Not '-oFILE' or '-pPIPELINE' but a misspelled flag or pass; '-pxla_expand_shard' is no '-p' either.
            if _FLAG_LIKE.fullmatch(a) or _with_underscores(name, names, flags):
                raise UsageError(unknown_flag_message([a], parser))
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


def _with_underscores(name: str, names: dict[str, str], flags: set[str]) -> bool:
    """Whether ``name`` is a pass or flag spelled with '_' for '-' (MLIR's names use '-')."""
    hyphenated = name.replace("_", "-")
    return hyphenated != name and (hyphenated in names or f"-{hyphenated}" in flags or f"--{hyphenated}" in flags)


def unknown_flag_message(unknown: list[str], parser: argparse.ArgumentParser) -> str:
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


_PLUGIN_FLAGS = ("-load-pass-plugin", "--load-pass-plugin")


def load_plugins_argv(argv: list[str]) -> None:
    """Loads the ``--load-pass-plugin`` plugins (``=`` and space forms) first: their passes become pass flags and
    pipeline elements. A plugin that does not load is a :class:`UsageError` naming it."""
    specs = []
    for i, a in enumerate(argv):
        name, eq, value = a.partition("=")
        if name in _PLUGIN_FLAGS:
            if not eq and (i + 1 == len(argv) or argv[i + 1].startswith("-")):
                raise UsageError(f"argument {name}: expected a plugin, {name}=FILE.py or {name}=dotted.module")
            specs.append(value if eq else argv[i + 1])
    for spec in specs:
        if not spec.strip():
            raise UsageError("--load-pass-plugin= needs a plugin: a .py file or a dotted module name")
        try:
            plugins.load_plugin(spec)
        except plugins.PluginError as e:
            raise UsageError(str(e)) from None


def end_of_flags(argv: list[str]) -> tuple[list[str], list[str]]:
    """The arguments before ``--`` and the rest from it on: after ``--`` every argument is a file name, even
    ``-cse`` (the mlir-opt and argparse convention), so no flag rewriting may look at them."""
    if "--" not in argv:
        return argv, []
    at = argv.index("--")
    return argv[:at], argv[at:]
