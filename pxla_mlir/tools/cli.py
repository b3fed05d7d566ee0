"""pxla-mlir: the user-facing command line (``--version``, ``passes``)."""

from __future__ import annotations

import argparse
import inspect
import sys

from .. import __version__
from ..pass_infra import registry


def _cmd_passes(args) -> int:
    names = args.names or [*registry.PASSES, *registry.PIPELINES]
    for name in names:
        cls = registry.load(name)
        if cls is None:
            print(f"pxla-mlir: error: unknown pass or pipeline '{name}' (run 'pxla-mlir passes')",
                  file=sys.stderr)
            return 1
        if args.names:
            doc = inspect.getdoc(sys.modules[cls.__module__]) if cls.__module__.startswith("pxla_mlir.passes") \
                else inspect.getdoc(cls)
            print(doc or cls.summary)
        else:
            print(f"{name:<34} {cls.summary}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pxla-mlir", description="pxla_mlir command line")
    parser.add_argument("--version", action="version", version=f"pxla-mlir {__version__}")
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("passes", help="list passes and pipelines, or show one's documentation")
    p.add_argument("names", nargs="*", help="pass or pipeline arguments to document")
    p.set_defaults(func=_cmd_passes)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
