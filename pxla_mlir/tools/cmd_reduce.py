"""pxla-mlir reduce: from a module on which a test fails to the smallest one on which it still fails.

    pxla-mlir reduce big.mlir --test './still_fails.sh' -o small.mlir      # exit 0 = still interesting
    pxla-mlir reduce big.mlir --pipeline 'builtin.module(pxla-pmap-pipeline)' --expect-error 'not expanded'
    pxla-mlir reduce --from-reproducer ~/.cache/pxla_mlir/reproducers/pxla_repro_x.mlir -o small.mlir
    pxla-mlir reduce big.mlir --compile                                    # the same XLA compile error
    pxla-mlir reduce big.mlir --compare-pipeline 'builtin.module(pxla-pmap-pipeline{unshard=all-reduce})'

The input is tested first (not interesting: exit 2, saying why). The output
always parses and verifies and passes the test; it is written (a temporary
file beside it, then a rename) only when the reduction succeeds, or when
Ctrl-C stops it (the smallest module found so far; exit 130). The reducer is
:mod:`pxla_mlir.mlir.reduce`; the tests are chosen in :mod:`.reduce_tests`.
"""

from __future__ import annotations

import argparse
import os
import tempfile

from pxla_mlir.tools.errors import CliError, non_negative_int, positive_int

__all__ = ["add_parser", "run"]

#: The flags that choose the test, in the order the help lists them.
_MODES = {"test": "--test", "pipeline": "--pipeline", "from_reproducer": "--from-reproducer", "compile": "--compile",
          "compare_pipeline": "--compare-pipeline", "compare_jax": "--compare-jax"}


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "reduce", help="shrink a module to the smallest one on which a test still fails (as llvm-reduce does)",
        description="Shrink IN.mlir to the smallest module on which a test still succeeds (\"is interesting\": "
                    "the failure you are chasing is still there). Reductions remove ops (their results replaced "
                    "by operands, arguments or zeros of their type), functions, arguments and results of @main, "
                    "inline or drop regions, splat constants, drop attributes and run canonicalize, cse and "
                    "symbol-dce, as long as the test still succeeds. Progress goes to stderr on a terminal.",
        epilog="exit 0: OUT was written; 2: a mistake, or the input is not interesting; 130: interrupted (OUT holds "
               "the smallest interesting module found so far).")
    p.add_argument("input", nargs="?", metavar="IN.mlir",
                   help="the module (a reproducer keeps its trailer, so the output is one too)")
    how = p.add_argument_group("the test (one of)")
    how.add_argument("--test", metavar="CMD",
                     help="a shell command run on each candidate (its path substituted for {} or appended); exit 0 "
                          "means the candidate is still interesting")
    how.add_argument("--pipeline", metavar="PIPELINE",
                     help="a pipeline (as pxla-opt -p) that must still fail with the input's first error, or "
                          "--expect-error's; with --compile or --compare-*: the pipeline to run before XLA")
    how.add_argument("--from-reproducer", metavar="FILE",
                     help="a saved reproducer: its module, pipeline and plugins, and the error it gives")
    how.add_argument("--compile", action="store_true",
                     help="XLA must still fail to compile it (as pxla-mlir run loads it) with the input's error "
                          "(numbers in it free) or --expect-error's")
    how.add_argument("--compare-pipeline", metavar="PIPELINE",
                     help="its results after PIPELINE must still differ from those after --pipeline (or the "
                          "pipeline it needs), as pxla-mlir run --compare-pipeline compares them")
    how.add_argument("--compare-jax", action="store_true",
                     help="its results must still differ from jax's run of it (XLA compiles the text as read, as "
                          "jax.jit compiles jax's StableHLO)")
    p.add_argument("--expect-error", metavar="REGEX",
                   help="a Python regular expression an error of the pipeline or XLA must match (default: the "
                        "input's first error)")
    p.add_argument("--load-pass-plugin", action="append", default=[], metavar="FILE.py|MODULE",
                   help="load the passes of a plugin (repeatable), here and in every test")
    p.add_argument("-o", dest="output", default="-", metavar="OUT.mlir", help="the reduced module ('-': stdout, the default)")
    p.add_argument("--emit-lit-test", metavar="FILE",
                   help="also write the reduced module as a lit test (RUN line, expected-error or CHECK lines)")
    p.add_argument("--jobs", type=positive_int, default=min(os.cpu_count() or 1, 8), metavar="N",
                   help="tests run at a time (default: the cores, at most 8); the result does not depend on it")
    p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                   help="a test that runs longer is killed, the candidate not interesting (default 300; 0: none)")
    p.add_argument("--seed", type=non_negative_int, metavar="N",
                   help="the seed of the comparisons' random inputs (>= 0; default 0)")
    p.add_argument("--rtol", type=float, help="the comparisons' relative tolerance (default 1e-05)")
    p.add_argument("--atol", type=float, help="the comparisons' absolute tolerance (default 1e-08)")
    p.add_argument("--verbose", action="store_true", help="a line on stderr for every reduction kept")
    p.set_defaults(func=run)
    return p


def _mode(args: argparse.Namespace) -> str:
    given = [k for k in _MODES if getattr(args, k) not in (None, False)]
    chosen = [k for k in given if k != "pipeline"] or given
    if not chosen:
        raise CliError("say what is interesting: --test CMD, --pipeline PIPELINE, --from-reproducer FILE, --compile, "
                       "--compare-pipeline PIPELINE or --compare-jax (see pxla-mlir reduce --help)")
    if len(chosen) > 1:
        raise CliError(f"{_MODES[chosen[0]]} and {_MODES[chosen[1]]} are two tests: give one")
    mode = chosen[0]
    if mode in ("test", "from_reproducer") and args.pipeline is not None:
        raise CliError(f"--pipeline does not apply to {_MODES[mode]} "
                       + ("(put the pipeline in the command)" if mode == "test" else "(it runs the recorded one)"))
    if args.expect_error is not None and mode in ("test", "compare_pipeline", "compare_jax"):
        raise CliError(f"--expect-error applies to a pipeline's or XLA's errors, not to {_MODES[mode]}")
    if not mode.startswith("compare") and any(getattr(args, k) is not None for k in ("seed", "rtol", "atol")):
        raise CliError("--seed, --rtol and --atol apply to --compare-pipeline and --compare-jax")
    if mode == "compare_jax" and args.emit_lit_test:
        raise CliError("--emit-lit-test has no RUN line for --compare-jax (pxla-mlir run compares pipelines): "
                       "reduce with --compare-pipeline to get a lit test")
    if (args.input is None) == (mode != "from_reproducer"):
        raise CliError("give the module to reduce, IN.mlir" if args.input is None else
                       f"--from-reproducer reads the module from the reproducer: drop {args.input!r}")
    if mode == "test" and not args.test.strip():
        raise CliError("--test needs a command, e.g. --test \"pxla-opt {} -p 'builtin.module(...)' 2>&1 | grep -q "
                       "'my error'\"")
    if args.timeout < 0:
        raise CliError(f"--timeout must be >= 0 seconds (0: no limit), got {args.timeout:g}")
    return {"from_reproducer": "reproducer", "compare_pipeline": "compare", "compare_jax": "compare"}.get(mode, mode)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise CliError(f"cannot read {path!r}: {e.strerror}") from None


def run(args: argparse.Namespace) -> int:
    from pxla_mlir.tools.reduce_session import Session

    mode = _mode(args)
    source = args.from_reproducer if mode == "reproducer" else args.input
    for flag, path in (("-o", args.output), ("--emit-lit-test", args.emit_lit_test)):
        if not path or path == "-":
            continue
        if os.path.isdir(path):
            raise CliError(f"{flag} {path!r} is a directory: give a file name")
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):  # found now, not after the reduction
            raise CliError(f"{flag} {path!r}: cannot write in {folder!r} "
                           f"({'no such directory' if not os.path.isdir(folder) else 'permission denied'})")
    if args.emit_lit_test:
        lit = os.path.abspath(args.emit_lit_test)
        for what, path in (("the input", source), ("the output", args.output)):
            if path != "-" and lit == os.path.abspath(path):
                raise CliError(f"--emit-lit-test {args.emit_lit_test!r} would overwrite {what}: give another file")
    with tempfile.TemporaryDirectory(prefix="pxla-reduce-") as directory:
        return Session(args, mode, source, _read(source), directory).run()
