"""pxla-mlir show-sharding: draw which piece of an array each device holds."""

from __future__ import annotations

from .errors import CliError


def add_parser(sub) -> None:
    s = sub.add_parser("show-sharding", help="draw which piece of an array each device holds")
    s.add_argument("--shape", required=True, help="array shape, e.g. 8,12")
    s.add_argument("--hlo", help="an HLO sharding string (mhlo.sharding)")
    s.add_argument("--spec", help="a ShardingSpec(...) as printed by repr()")
    s.add_argument("--mesh", help="mesh axes and sizes, e.g. x=2,y=4 (with --dims)")
    s.add_argument("--dims", help="mesh axes per array dimension: ',' between dims, '*' between axes, '-' none")
    s.add_argument("--devices", type=int, help="number of devices (default: what the sharding names)")
    s.add_argument("--no-color", action="store_true", help="plain text")
    s.set_defaults(func=run)


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.replace("x", ",").split(",") if v.strip())
    except ValueError:
        raise CliError(f"{what} must be comma-separated integers, got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise CliError(f"{what} must be non-negative integers, got {text!r}")
    return values


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


def run(args) -> int:
    from ..sharding import ShardingSpec, parse_hlo_sharding
    from ..sharding.show import show_sharding

    shape = _ints(args.shape, "--shape")
    given = [a for a in (args.hlo, args.spec, args.mesh) if a is not None]
    if len(given) != 1:
        raise CliError("give exactly one of --hlo, --spec, or --mesh with --dims")
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
    return 0
