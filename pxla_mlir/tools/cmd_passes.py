"""pxla-mlir passes: list the passes and pipelines, or document some, as text or Markdown.

    pxla-mlir passes                                   # every pass and pipeline, one line each
    pxla-mlir passes pxla-expand-shard                 # its docstring and options, for a terminal
    pxla-mlir passes --markdown --load-pass-plugin=my_pass.py my-pass   # a section as docs/passes.md has

jax-free, as pxla-opt: the passes are documented from their classes.
"""

from __future__ import annotations

import argparse

from pxla_mlir.mlir.cli import pass_docs
from pxla_mlir.mlir.pass_infra import plugins
from pxla_mlir.mlir.pass_infra.registry import REGISTRY
from pxla_mlir.mlir.support.suggest import did_you_mean
from pxla_mlir.tools.errors import CliError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("passes", help="list passes and pipelines, or show one's documentation")
    p.add_argument("names", nargs="*", help="pass or pipeline arguments to document")
    p.add_argument("--load-pass-plugin", action="append", default=[], metavar="FILE.py|MODULE",
                   help="load the passes of a plugin first (repeatable), to list or document them")
    p.add_argument("--markdown", action="store_true",
                   help="write the documentation as Markdown, a section per pass (summary, plugin, options with "
                        "types and defaults, description) as docs/passes.md has; without NAME, every loaded pass")
    p.set_defaults(func=run)


def _known() -> list[str]:
    return [*REGISTRY.passes, *REGISTRY.pipelines, *REGISTRY.registered()]


def run(args: argparse.Namespace) -> int:
    for spec in args.load_pass_plugin:
        try:
            plugins.load_plugin(spec)
        except plugins.PluginError as e:
            raise CliError(str(e)) from None
    if not args.names:
        plugins.read_entry_points()
    names = args.names or _known()
    for name in names:
        if plugins.resolve(name) is None:
            raise CliError(f"unknown pass or pipeline '{name}' (run 'pxla-mlir passes'){did_you_mean(name, _known())}")
    if args.markdown:
        print("\n".join(line for name in names for line in ["", *pass_docs.markdown(name)]).strip())
    elif args.names:
        print("\n\n".join(pass_docs.text(name) for name in names))
    else:
        for name in names:
            origin = REGISTRY.origin(name)
            print(f"{name:<34} {pass_docs.pass_class(name).summary}{' [' + origin[2:-1] + ']' if origin else ''}")
    return 0
