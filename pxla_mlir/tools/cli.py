"""pxla-mlir: the user-facing command line.

    pxla-mlir passes [NAME...]             list passes/pipelines, or show one's documentation
    pxla-mlir show-sharding --shape 8,12 --mesh x=2,y=4 --dims x,y
    pxla-mlir show-sharding --shape 8,3 --hlo '{devices=[4,1,2]<=[8] last_tile_dim_replicate}'
    pxla-mlir show-sharding --shape 4 --spec 'ShardingSpec((Chunked([4]),), (ShardedAxis(0), Replicated(2)))'
"""

from __future__ import annotations

import argparse
import inspect
import sys

from .. import __version__
from ..pass_infra import registry


class CliError(Exception):
    """A user mistake: printed as one line, exit 1."""


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


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.replace("x", ",").split(",") if v.strip())
    except ValueError:
        raise CliError(f"{what} must be comma-separated integers, got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise CliError(f"{what} must be non-negative integers, got {text!r}")
    return values


def _cmd_show_sharding(args) -> int:
    from ..sharding import AbstractMesh, MeshError, ShardingSpec, ShardingSpecError, parse_hlo_sharding
    from ..sharding.show import show_sharding

    shape = _ints(args.shape, "--shape")
    given = [a for a in (args.hlo, args.spec, args.mesh) if a is not None]
    if len(given) != 1:
        raise CliError("give exactly one of --hlo, --spec, or --mesh with --dims")
    try:
        if args.hlo is not None:
            sharding = parse_hlo_sharding(args.hlo)
        elif args.spec is not None:
            sharding = ShardingSpec.parse(args.spec)
        else:
            if args.dims is None:
                raise CliError("--mesh needs --dims (mesh axes per dimension, e.g. x*y,-)")
            mesh = _parse_mesh(args.mesh)
            dims = [[] if d in ("-", "") else d.split("*") for d in args.dims.split(",")]
            if len(dims) != len(shape):
                raise CliError(f"--dims has {len(dims)} entries for a {len(shape)}-d shape {shape}")
            mapping = {a: dim for dim, axes in enumerate(dims) for a in axes}
            mesh.tile_shape(shape, mapping)
            sharding = mesh.sharding_spec(len(shape), mapping)
        show_sharding(shape, sharding, num_devices=args.devices, color=False if args.no_color else None)
    except (ValueError, MeshError, ShardingSpecError) as e:
        raise CliError(str(e)) from None
    return 0


def _parse_mesh(text: str):
    from ..sharding import AbstractMesh

    names, sizes = [], []
    for item in text.split(","):
        name, eq, size = item.partition("=")
        if not eq or not size.strip().isdigit():
            raise CliError(f"--mesh must look like x=2,y=4, got {text!r}")
        names.append(name.strip())
        sizes.append(int(size))
    return AbstractMesh(sizes, names)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pxla-mlir", description="pxla_mlir command line")
    parser.add_argument("--version", action="version", version=f"pxla-mlir {__version__}")
    sub = parser.add_subparsers(dest="command")
    p = sub.add_parser("passes", help="list passes and pipelines, or show one's documentation")
    p.add_argument("names", nargs="*", help="pass or pipeline arguments to document")
    p.set_defaults(func=_cmd_passes)
    s = sub.add_parser("show-sharding", help="draw which piece of an array each device holds")
    s.add_argument("--shape", required=True, help="array shape, e.g. 8,12")
    s.add_argument("--hlo", help="an HLO sharding string (mhlo.sharding)")
    s.add_argument("--spec", help="a ShardingSpec(...) as printed by repr()")
    s.add_argument("--mesh", help="mesh axes and sizes, e.g. x=2,y=4 (with --dims)")
    s.add_argument("--dims", help="mesh axes per array dimension: ',' between dims, '*' between axes, '-' none")
    s.add_argument("--devices", type=int, help="number of devices (default: what the sharding names)")
    s.add_argument("--no-color", action="store_true", help="plain text")
    s.set_defaults(func=_cmd_show_sharding)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 1
    try:
        return args.func(args)
    except CliError as e:
        print(f"pxla-mlir: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
