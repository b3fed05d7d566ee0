"""pxla-mlir show-sharding: draw which piece of an array each device holds.

Pictures of more than a few rows or columns are summarized (see
:mod:`pxla_mlir.mlir.sharding.show`); colors follow rich: a terminal, unless
NO_COLOR is set, FORCE_COLOR forces them, and --color overrides both.
"""

from __future__ import annotations

from pxla_mlir.tools.errors import CliError, positive_int


def add_parser(sub) -> None:
    s = sub.add_parser("show-sharding", help="draw which piece of an array each device holds")
    s.add_argument("--shape", required=True, help="array shape, e.g. 8,12")
    s.add_argument("--hlo", help="an HLO sharding string (mhlo.sharding)")
    s.add_argument("--spec", help="a ShardingSpec(...) as printed by repr()")
    s.add_argument("--mesh", help="mesh axes and sizes, e.g. x=2,y=4 (with --dims)")
    s.add_argument("--dims", help="mesh axes per array dimension: ',' between dims, '*' between axes, '-' none")
    s.add_argument("--devices", type=positive_int,
                   help="number of devices (default: what the sharding names; --hlo only)")
    s.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="auto (the default): on a terminal, unless NO_COLOR is set (FORCE_COLOR forces it)")
    s.add_argument("--no-color", action="store_const", dest="color", const="never", help="plain text (--color never)")
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
    from pxla_mlir.mlir.sharding import AbstractMesh

    names, sizes = [], []
    for item in text.split(","):
        name, eq, size = item.partition("=")
        if not eq or not size.strip().isdigit():
            raise CliError(f"--mesh must look like x=2,y=4, got {text!r}")
        names.append(name.strip())
        sizes.append(int(size))
    return AbstractMesh(sizes, names)


def run(args) -> int:
    from pxla_mlir.mlir.sharding import ShardingSpec, parse_hlo_sharding
    from pxla_mlir.mlir.sharding.show import show_sharding

    shape = _ints(args.shape, "--shape")
    given = [a for a in (args.hlo, args.spec, args.mesh) if a is not None]
    if len(given) != 1:
        raise CliError("give exactly one of --hlo, --spec, or --mesh with --dims")
    if args.hlo is not None:
        try:
            sharding = parse_hlo_sharding(args.hlo)
        except ValueError as e:  # the sharding string is wrong
            raise CliError(f"--hlo: {e}") from None
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
    _check_devices(sharding, args.devices)
    try:
        color = {"auto": None, "always": True, "never": False}[args.color]  # None: rich decides
        show_sharding(shape, sharding, num_devices=args.devices, color=color)
    except ValueError as e:  # the sharding does not fit the shape
        raise CliError(str(e)) from None
    return 0


def _check_devices(sharding, devices: int | None) -> None:
    """--devices must fit the sharding; it is never silently ignored."""
    from pxla_mlir.mlir.sharding import ShardingSpec
    from pxla_mlir.mlir.sharding.devices import MAX_DEVICES

    if devices is None:
        return
    if devices > MAX_DEVICES:
        raise CliError(f"--devices {devices} is more than the {MAX_DEVICES} devices a sharding may span")
    named = sharding.num_devices
    if isinstance(sharding, ShardingSpec):
        if devices != named:
            raise CliError(f"this sharding spans exactly {named} devices; drop --devices or give --devices {named}")
    elif named is not None and devices < named:
        raise CliError(f"the sharding names {named} devices, so --devices {devices} is too few")
