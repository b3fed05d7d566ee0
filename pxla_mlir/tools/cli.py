"""pxla-mlir: the user-facing command line.

    pxla-mlir passes [NAME...]            list passes/pipelines, or show one's documentation
    pxla-mlir emit TARGET [...]           print the MHLO (or another stage) of a pmap/xmap
    pxla-mlir diff A B [--ignore ATTR]    MLIR-aware diff of two modules or emit specs
    pxla-mlir run TARGET [...]            compile, run, time (TARGET may be FILE.mlir: run a module, compare results)
    pxla-mlir explore TARGET [-o page]    one HTML page: every stage, pass diffs, collectives, shardings
    pxla-mlir show-sharding --shape ...   draw which piece of an array each device holds

Mistakes print one line (``pxla-mlir: error: ...``) and exit 1 (2 for ``run
FILE.mlir``, whose 1 means that compared results differ).
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys

from .. import __version__
from ..errors import PxlaUserError
from ..pass_infra import registry
from . import cmd_diff, cmd_emit, cmd_explore, cmd_sharding
from .errors import CliError, describe, positive_int

PROG = "pxla-mlir"


def _cmd_passes(args) -> int:
    names = args.names or [*registry.PASSES, *registry.PIPELINES]
    for name in names:
        cls = registry.load(name)
        if cls is None:
            raise CliError(f"unknown pass or pipeline '{name}' (run 'pxla-mlir passes')")
        if args.names:
            is_pass = name in registry.PASSES
            print(inspect.getdoc(sys.modules[cls.__module__] if is_pass else cls) or cls.summary)
        else:
            print(f"{name:<34} {cls.summary}")
    return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 1 (argparse: usage dump, exit 2)
        raise CliError(f"{message} (see {self.prog} --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="pxla_mlir command line")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("--cpu-devices", type=positive_int, default=8, metavar="N",
                        help="virtual CPU devices when XLA_FLAGS does not set a count (default 8)")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    p = sub.add_parser("passes", help="list passes and pipelines, or show one's documentation")
    p.add_argument("names", nargs="*", help="pass or pipeline arguments to document")
    p.set_defaults(func=_cmd_passes)
    cmd_emit.add_parsers(sub)
    cmd_diff.add_parser(sub)
    cmd_sharding.add_parser(sub)
    cmd_explore.add_parser(sub)
    return parser


def _cpu_devices(n: int) -> None:
    """jax reads the virtual CPU device count once, when its backend starts."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = None
    try:
        args = parser.parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)  # run --processes starts copies of this command
        if not getattr(args, "func", None):
            parser.print_help()
            return 1
        _cpu_devices(args.cpu_devices)
        return args.func(args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as e:  # one line; only a bug of ours asks for the traceback
        if os.environ.get("PXLA_DEBUG") and not isinstance(e, PxlaUserError):
            raise
        message, is_bug = describe(e)
        hint = " (set PXLA_DEBUG=1 for the traceback)" if is_bug else ""
        print(f"{PROG}: error: {message}{hint}", file=sys.stderr)
        reproducer = getattr(e, "reproducer", None)
        if reproducer:
            print(f"{PROG}: reproduce with: pxla-opt {reproducer} --pass-pipeline='{e.pipeline}'", file=sys.stderr)
        return _error_exit(args, sys.argv[1:] if argv is None else argv)


def _error_exit(args, argv: list[str]) -> int:
    """1, or 2 for a module run (its 1 means that results differ), also when
    its flags did not parse."""
    from .cmd_run_module import ERROR_EXIT, is_module_run

    return getattr(args, "error_exit", None) or (ERROR_EXIT if args is None and is_module_run(argv) else 1)


if __name__ == "__main__":
    sys.exit(main())
