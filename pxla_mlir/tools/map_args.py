"""The command-line flags that say how to map a plain function (``--map``,
each kind's shape flags, its pipeline's options, from
:mod:`pxla_mlir.maps.registry`) and the example arguments, shared by emit,
run and explore. Building them loads no kind (and no jax)."""

from __future__ import annotations

import argparse

from pxla_mlir.maps import registry
from pxla_mlir.mlir.pipelines import EXTRA_PASSES
from pxla_mlir.tools.emit import MapOptions, map_flags

__all__ = ["MAP_FLAGS", "add_map_arguments", "map_options"]

#: Every mapping flag, as a field name ("map" first).
MAP_FLAGS = map_flags()


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def add_map_arguments(p: argparse.ArgumentParser, target_help: str = "module:function or path/to/file.py:function") -> None:
    p.add_argument("target", help=target_help)
    names = list(registry.KINDS)
    g = p.add_argument_group(f"how to map a plain function (a pxla_mlir.{'/'.join(names)} object takes only its "
                             f"pipeline options, and its kind's object flags)")
    g.add_argument("--map", choices=names)
    helps: dict[str, list[str]] = {}
    kinds_of: dict[str, list[str]] = {}
    option_choices: dict[str, tuple] = {}
    for kind in names:
        for flag in registry.cli_flags(kind):
            helps.setdefault(flag.field, [flag.help])
            kinds_of.setdefault(flag.field, []).append(kind)
        for name, (help, values) in registry.options(kind).items():
            helps.setdefault(name, [help])
            kinds_of.setdefault(name, []).append(kind)
            if values is not None:
                option_choices[name] = values
    for field in MAP_FLAGS[1:]:
        text = f"{'/'.join(kinds_of[field])}: {helps[field][0]}"
        if field in option_choices:
            g.add_argument(_flag(field), choices=option_choices[field], help=text)
        elif field == EXTRA_PASSES:
            g.add_argument(_flag(field), metavar="PIPELINE", help=text)
        else:
            g.add_argument(_flag(field), help=text)
    g.add_argument("--arg", action="append", default=[], metavar="DTYPE[DIMS]",
                   help="argument shape, one per positional argument: f32[8,128], i32[], bool[4] (or jax's "
                        "float32[8,128])")
    p.add_argument("--load-pass-plugin", action="append", default=[], metavar="FILE.py|dotted.module",
                   help="load passes of your own (repeatable, as mlir-opt's flag): --extra-passes and "
                        "--pipeline can then name them")


def map_options(args: argparse.Namespace) -> MapOptions:
    return MapOptions(args.map, tuple(args.arg), **{f: getattr(args, f) for f in MAP_FLAGS[1:]})

