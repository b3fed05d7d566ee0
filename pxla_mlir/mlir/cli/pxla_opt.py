"""pxla-opt: mlir-opt for pxla passes (and jaxlib's), with mlir-opt's flag names.

    pxla-opt in.mlir --pass-pipeline='builtin.module(pxla-handoff-pipeline)' -o out.mlir
    pxla-opt in.mlir -p 'builtin.module(pxla-expand-shard,canonicalize)'
    pxla-opt in.mlir -pxla-expand-unshard='strategy=all-reduce' -canonicalize  # a flag per pass, run in order
    pxla-opt --run-reproducer /tmp/pxla_repro_abc.mlir                         # a failed pipeline, again
    pxla-opt in.mlir --load-pass-plugin=my_passes.py -my-pass='n=2'          # passes of a plugin

jax-free on purpose: it loads jaxlib's MLIR bindings only, so it starts fast.
Errors in the input print ``file:line:col: error: ...`` (with the source line
and a caret under the column) and exit 1; mistakes on the command line (flags,
the pipeline) print one ``pxla-opt: error: ...`` and exit 2, as pxla-mlir's
do; never a traceback.
"""

from __future__ import annotations

import os
import sys

from pxla_mlir.mlir.cli.opt_driver import Driver, split_chunks
from pxla_mlir.mlir.cli.opt_flags import (
    EXAMPLES,
    PROG,
    USAGE_EXIT,
    UsageError,
    bool_flags_argv,
    build_arg_parser,
    end_of_flags,
    list_passes,
    load_plugins_argv,
    pass_flags_argv,
    split_marker_argv,
    unknown_flag_message,
    version_text,
)
from pxla_mlir.mlir.pass_infra.pipeline_syntax import ROOT_ANCHOR
from pxla_mlir.mlir.pass_infra.plugins import PluginError

# The command line (opt_flags) and the run over the input (opt_driver) live beside this module; the names
# tests, docs and tools read from here stay.
__all__ = ["EXAMPLES", "PROG", "USAGE_EXIT", "Driver", "UsageError", "build_arg_parser", "list_passes", "main",
           "pass_flags_argv", "split_chunks"]


def main(argv: list[str] | None = None) -> int:
    try:
        flags, operands = end_of_flags(sys.argv[1:] if argv is None else list(argv))
        flags = bool_flags_argv(split_marker_argv(flags))
        load_plugins_argv(flags)  # before the pass flags: a plugin's passes are flags too
        parser = build_arg_parser()
        flags, pass_flags = pass_flags_argv(flags, parser)
        args, unknown = parser.parse_known_args(flags + operands)
        if unknown:
            raise UsageError(unknown_flag_message(unknown, parser))
        if pass_flags:
            if args.pass_pipeline is not None:
                raise UsageError(f"give the passes either as flags ({' '.join('-' + e for e in pass_flags[:2])} ...) "
                                 f"or as -p/--pass-pipeline, not both")
            args.pass_pipeline = f"{ROOT_ANCHOR}({','.join(pass_flags)})"
        if args.version:
            print(version_text())
            return 0
        if args.list_passes:
            list_passes(sys.stdout)
            return 0
        return Driver(args).run()
    except (UsageError, PluginError) as e:  # PluginError: an installed plugin (entry point) that does not load
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
