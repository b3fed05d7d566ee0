"""pxla-mlir show-sharding: draw which piece of an array each device holds.

    pxla-mlir show-sharding --shape 8,12 --hlo '{devices=[2,4]<=[8]}'
    pxla-mlir show-sharding --shape 8,12 '#sdy.sharding<@mesh, [{"x"}, {}]>' --mesh x=2,y=4
    pxla-mlir show-sharding --shape 8,12 "P('x', 'y')" --mesh x=2,y=4
    pxla-mlir show-sharding step.mlir              # every argument and result of every function

A sharding comes as a flag (``--hlo``, ``--spec``, ``--sdy``, ``--pspec``, or
``--mesh`` with ``--dims``) or as the one argument, whose form is told by its
start: ``{`` an HLO sharding, ``#sdy.sharding`` Shardy, ``P(``/``PartitionSpec(``/``(``
jax's PartitionSpec (``--pspec`` takes plain ``x,y`` too; see
:mod:`pxla_mlir.mlir.sharding.pspec_text`), ``ShardingSpec(``, or a module file. Shardy and
PartitionSpec name mesh axes: ``--mesh x=2,y=4`` gives their sizes (a Shardy
``mesh<[...]>`` written inline, or a module's ``sdy.mesh``, does too).

Pictures of more than a few rows or columns are summarized (see
:mod:`pxla_mlir.mlir.sharding.show`); colors follow rich: a terminal, unless
NO_COLOR is set, FORCE_COLOR forces them, and --color overrides both.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import math
import os
import re
import sys

from pxla_mlir.tools.errors import CliError, positive_int

#: The argument's forms, by how each starts (a PartitionSpec: P(, PartitionSpec(, jax.sharding.PartitionSpec(,
#: jax.P(, or a bare tuple as tuple(spec) prints).
_FORMS = ((re.compile(r"\{"), "hlo"), (re.compile(r"#sdy\.sharding"), "sdy"),
          (re.compile(r"([\w.]*\.)?(P|PartitionSpec)\(|\("), "pspec"), (re.compile(r"ShardingSpec\("), "spec"))


def add_parser(sub) -> None:
    s = sub.add_parser("show-sharding", help="draw which piece of an array each device holds",
                       description="Draw which piece of an array each device holds, for a sharding in any of the "
                                   "forms jax, XLA and Shardy write, or for every argument and result of a module.")
    s.add_argument("sharding", nargs="?", metavar="SHARDING|FILE.mlir",
                   help="a sharding, its form told by its start ({...: HLO, #sdy.sharding<...>: Shardy, P(...) or "
                        "(...): PartitionSpec, ShardingSpec(...)), or a module file: each function's argument and result "
                        "shardings (mhlo.sharding, sdy.sharding, pxla.tile_dims)")
    s.add_argument("--shape", type=array_shape, help="array shape, e.g. 8,12 or 8x12 (not for a module file: its types give them)")
    s.add_argument("--hlo", help="an HLO sharding string (mhlo.sharding)")
    s.add_argument("--spec", help="a ShardingSpec(...) as printed by repr()")
    s.add_argument("--sdy", metavar="SHARDING", help="a Shardy sharding: #sdy.sharding<@mesh, [{\"x\"}, {}]> "
                                                     "(with --mesh, unless it writes its mesh inline)")
    s.add_argument("--pspec", metavar="SPEC", help="a jax PartitionSpec: P('x', None), P(('x', 'y'),), "
                                                   "('x', None), or plain x,y (with --mesh)")
    s.add_argument("--mesh", help="mesh axes and sizes, e.g. x=2,y=4 (with --dims, --sdy or --pspec)")
    s.add_argument("--dims", help="mesh axes per array dimension: ',' between dims, '*' between axes, '-' none")
    s.add_argument("--devices", type=positive_int,
                   help="number of devices (default: what the sharding names; --hlo only)")
    s.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="auto (the default): on a terminal, unless NO_COLOR is set (FORCE_COLOR forces it)")
    s.add_argument("--no-color", action="store_const", dest="color", const="never", help="plain text (--color never)")
    s.set_defaults(func=run)


def array_shape(text: str) -> tuple[int, ...]:
    """--shape: the array's sizes, ',' between them (8,12; 8x12 too), each an integer >= 0."""
    def bad(why: str) -> argparse.ArgumentTypeError:
        return argparse.ArgumentTypeError(f"{text!r}: {why}; give the array's sizes, e.g. 8,12")

    if not text.strip():
        raise bad("no sizes")
    sizes = text.split("x") if re.fullmatch(r"\s*\d+(\s*x\s*\d+)+\s*", text) else text.split(",")
    shape = []
    for dim, size in enumerate(s.strip() for s in sizes):
        if not size:
            end = " (it ends in a comma)" if dim == len(sizes) - 1 else ""
            raise bad(f"dimension {dim}'s size is empty{end}")
        if not re.fullmatch(r"[+-]?\d+", size):
            raise bad(f"dimension {dim}'s size {size!r} is not an integer")
        if int(size) < 0:
            raise bad(f"dimension {dim}'s size {size} is negative")
        shape.append(int(size))
    return tuple(shape)


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


Axes = list[tuple[str, int]]  # a mesh: (name, size) per axis, major first


def _mesh_axes(text: str | None, needed_by: str) -> Axes:
    if text is None:
        raise CliError(f"{needed_by} names mesh axes: give their sizes with --mesh, e.g. --mesh x=2,y=4")
    mesh = _parse_mesh(text)
    return list(zip(mesh.axis_names, mesh.axis_sizes))


def tiled(mesh: Axes, dims: list[list[str]], what: str):
    """The HloSharding of mesh axes per array dimension (major first; axes named nowhere replicate),
    with the mesh's devices in row-major order as Shardy, jax and a ShardingSpec number them."""
    import numpy as np

    from pxla_mlir.mlir.sharding import HloSharding

    sizes = dict(mesh)
    used = [a for axes in dims for a in axes]
    for a in used:
        if a not in sizes:
            raise CliError(f"{what}: mesh axis '{a}' is not in the mesh ({', '.join(f'{n}={s}' for n, s in mesh)})")
        if used.count(a) > 1:
            raise CliError(f"{what}: mesh axis '{a}' shards more than one dimension")
    rest = [n for n, _ in mesh if n not in used]
    names = [n for n, _ in mesh]
    devices = np.arange(math.prod(sizes.values())).reshape([s for _, s in mesh] or [1])
    devices = devices.transpose([names.index(a) for a in used + rest]) if mesh else devices
    tile = [math.prod(sizes[a] for a in axes) for axes in dims]
    replicas = math.prod(sizes[a] for a in rest)
    if math.prod(tile) == 1:
        return HloSharding.replicated()
    subgroups = [("replicated", replicas)] if replicas > 1 else []
    return HloSharding.tiled(tile, devices.reshape(tile + [s for _, s in subgroups]), subgroups)


_SDY = re.compile(r"\s*#sdy\.sharding<\s*(?P<mesh>@[\w.$-]+|@\"[^\"]*\"|mesh<[^>]*>)\s*,\s*\[(?P<dims>[^\]]*)\]"
                  r"(?P<rest>[^>]*)>\s*", re.S)
_SDY_AXIS = re.compile(r'\s*"(?P<name>[^"]*)"\s*(?P<sub>:\s*\(\d+\)\s*\d+)?\s*')


def parse_sdy(text: str, mesh_flag: str | None, meshes: dict[str, Axes] | None = None) -> tuple[Axes, list[list[str]]]:
    """The mesh and the axes per dimension of ``#sdy.sharding<...>`` (open dimensions as written, ``?`` left out)."""
    m = _SDY.fullmatch(text)
    if m is None:
        raise CliError(f"not a Shardy sharding: {text!r}; expected #sdy.sharding<@mesh, [{{\"x\"}}, {{}}]> "
                       f"(a mesh symbol or mesh<[\"x\"=2]>, then one {{...}} per dimension)")
    where = m["mesh"]
    if where.startswith("mesh<"):
        if "device_ids" in where:
            raise CliError(f"{text}: a mesh with explicit device_ids is not drawn; give its axes with --mesh")
        mesh = [(n, int(s)) for n, s in re.findall(r'"([^"]*)"\s*=\s*(\d+)', where)]
    elif mesh_flag is not None:
        mesh = _mesh_axes(mesh_flag, "--sdy")
    elif meshes is not None and where[1:].strip('"') in meshes:
        mesh = meshes[where[1:].strip('"')]
    else:
        raise CliError(f"{text} names the mesh {where}: give its axes with --mesh, e.g. --mesh x=2,y=4")
    dims = []
    for body in re.findall(r"\{([^}]*)\}", m["dims"]):
        axes = []
        for item in [i for i in body.split(",") if i.strip() and i.strip() != "?"]:
            a = _SDY_AXIS.fullmatch(item)
            if a is None:
                raise CliError(f"{text}: expected quoted mesh axis names in each {{...}}, got {item.strip()!r}")
            if a["sub"]:
                raise CliError(f"{text}: sub-axis {item.strip()} is not drawn; split the mesh axis in --mesh instead")
            axes.append(a["name"])
        dims.append(axes)
    return mesh, dims


def parse_pspec(text: str, mesh: Axes) -> list[list[str]]:
    """The mesh axes per dimension of a PartitionSpec in any of its forms
    (:mod:`pxla_mlir.mlir.sharding.pspec_text`), checked against the mesh."""
    from pxla_mlir.mlir.sharding.pspec_text import UNCONSTRAINED, PartitionSpecSyntaxError, parse

    try:
        spec = parse(text)
    except PartitionSpecSyntaxError as e:
        raise CliError(str(e)) from None
    if UNCONSTRAINED in spec.entries:
        raise CliError(f"{text}: dimension {spec.entries.index(UNCONSTRAINED)} is UNCONSTRAINED, which leaves its "
                       f"layout to XLA's partitioner: there is nothing to draw; give None or mesh axes instead")
    names = [n for n, _ in mesh]
    for kind, axes in (("unreduced", spec.unreduced), ("reduced", spec.reduced)):
        for axis in sorted(axes):
            if axis not in names:
                raise CliError(f"{text}: {kind} mesh axis '{axis}' is not in the mesh "
                               f"({', '.join(f'{n}={s}' for n, s in mesh)})")
        if axes:  # the pieces are laid out as without them; what the devices along them hold differs
            print(f"pxla-mlir: note: {kind}={{{', '.join(map(repr, sorted(axes)))}}}: the devices along "
                  f"{', '.join(sorted(axes))} hold {'partial sums of' if kind == 'unreduced' else 'copies of'} "
                  f"their piece; the picture shows the layout", file=sys.stderr)
    return spec.dims()


def _form(text: str) -> str:
    if text.endswith(".mlir") or text == "-" or os.path.isfile(text):
        return "module"
    for start, form in _FORMS:
        if start.match(text.lstrip()):
            return form
    raise CliError(f"cannot tell what {text!r} is: give an HLO sharding ({{...}}), a Shardy sharding "
                   f"(#sdy.sharding<...>), a PartitionSpec (P(...)), a ShardingSpec(...) or a FILE.mlir")


def run(args) -> int:
    given = {flag: value for flag, value in (("--hlo", args.hlo), ("--spec", args.spec), ("--sdy", args.sdy),
                                             ("--pspec", args.pspec), ("--dims", args.dims)) if value is not None}
    if args.sharding is not None:
        form = _form(args.sharding)
        if given:
            raise CliError(f"give the sharding once: as the argument {args.sharding!r} or as {next(iter(given))}")
        if form == "module":
            return _show_module(args)
        given = {f"--{form}": args.sharding}
    if len(given) != 1:
        if not given and args.mesh is not None:
            raise CliError("--mesh needs --dims (mesh axes per dimension, e.g. x*y,-), --sdy or --pspec")
        raise CliError("give exactly one of --hlo, --spec, or --mesh with --dims, --sdy or --pspec (or the sharding "
                       "or a FILE.mlir as the argument)")
    if args.shape is None:
        raise CliError("--shape is needed for one sharding, e.g. --shape 8,12 (a module file's types give its "
                       "shapes)")
    shape = args.shape
    (flag, text), = given.items()
    sharding, devices = _sharding(flag, text, shape, args), args.devices
    if flag in ("--sdy", "--pspec") and devices is None and sharding.num_devices is None:
        devices = math.prod(s for _, s in _sharding_mesh(flag, text, args))  # replicated over the whole mesh
    _show(shape, sharding, devices, args)
    return 0


def _sharding_mesh(flag: str, text: str, args) -> Axes:
    return parse_sdy(text, args.mesh)[0] if flag == "--sdy" else _mesh_axes(args.mesh, text)


def _sharding(flag: str, text: str, shape: tuple[int, ...], args):
    from pxla_mlir.mlir.sharding import ShardingSpec, parse_hlo_sharding

    if flag == "--hlo":
        if args.mesh is not None:
            raise CliError("--mesh names axes; an HLO sharding tiles devices: drop --mesh")
        try:
            return parse_hlo_sharding(text)
        except ValueError as e:  # the sharding string is wrong
            raise CliError(f"--hlo: {e}") from None
    if flag == "--spec":
        return ShardingSpec.parse(text)
    if flag in ("--sdy", "--pspec"):
        if flag == "--sdy":
            mesh, dims = parse_sdy(text, args.mesh)
        else:
            mesh = _mesh_axes(args.mesh, text)
            dims = parse_pspec(text, mesh)
        if len(dims) > len(shape):
            raise CliError(f"{text} shards {len(dims)} dimensions of a {len(shape)}-d shape {shape}")
        return tiled(mesh, dims + [[] for _ in range(len(shape) - len(dims))], text)
    if args.mesh is None:
        raise CliError("--dims needs --mesh (the mesh axes' sizes, e.g. x=2,y=4)")
    mesh = _parse_mesh(args.mesh)
    dims = [[] if d in ("-", "") else d.split("*") for d in text.split(",")]
    if len(dims) != len(shape):
        raise CliError(f"--dims has {len(dims)} entries for a {len(shape)}-d shape {shape}")
    mapping = {a: dim for dim, axes in enumerate(dims) for a in axes}
    mesh.tile_shape(shape, mapping)
    return mesh.sharding_spec(len(shape), mapping)


def _show(shape, sharding, devices: int | None, args) -> None:
    from pxla_mlir.mlir.sharding.show import show_sharding

    _check_devices(sharding, devices)
    try:
        color = {"auto": None, "always": True, "never": False}[args.color]  # None: rich decides
        show_sharding(shape, sharding, num_devices=devices, color=color)
    except ValueError as e:  # the sharding does not fit the shape
        raise CliError(str(e)) from None


def _show_module(args) -> int:
    """Every argument's and result's sharding of every function in a module file."""
    from pxla_mlir.mlir.core.context import make_context
    from pxla_mlir.mlir.xla_handoff import parse, read

    for flag in ("shape", "mesh", "devices"):
        if getattr(args, flag) is not None:
            raise CliError(f"--{flag} does not apply to a module file: its types and attributes say everything")
    data, name = read(args.sharding) if args.sharding != "-" else (_stdin(), "<stdin>")
    ctx = make_context()
    module = parse(data, name, ctx)
    with ctx:
        values = list(module_shardings(module.operation))
    if not values:
        raise CliError(f"{name} has no function")
    for i, (where, shape, attr, sharding, devices) in enumerate(values):
        print(("\n" if i else "") + f"{where}: {attr}")
        if sharding is not None:
            _show(shape, sharding, devices, args)
    return 0


def _stdin() -> bytes:
    import sys

    return sys.stdin.buffer.read()


@dataclasses.dataclass(frozen=True)
class _ModuleMeshes:
    """What a module's shardings are over: its ``sdy.mesh`` symbols, its ``pxla.mesh``, its device count."""

    sdy: dict[str, Axes]
    pxla: Axes | None
    devices: int | None


def module_shardings(module):
    """(where, global shape, the attribute as written, its HloSharding or None, devices) for every argument
    and result of every function: ``mhlo.sharding``, ``sdy.sharding`` (over the module's ``sdy.mesh``
    symbols), or ``pxla.tile_dims`` (over ``pxla.mesh``: which piece of the global value each replica's is)."""
    from jaxlib.mlir import ir

    from pxla_mlir.mlir.core import ir_utils, pxla_attrs, shardy

    attrs = module.attributes
    counts = [ir.IntegerAttr(attrs[k]).value for k in ("mhlo.num_replicas", "mhlo.num_partitions") if k in attrs]
    pxla_mesh = None
    if pxla_attrs.MESH in attrs:
        pxla_mesh = _mesh_axes(ir.StringAttr(attrs[pxla_attrs.MESH]).value, pxla_attrs.MESH)
    meshes = _ModuleMeshes({n: list(m.axes) for n, m in shardy.meshes(module).items()}, pxla_mesh,
                           max(counts) if counts else None)
    for fn in ir_utils.functions(module):
        fn_type = ir.FunctionType(ir.TypeAttr(fn.attributes["function_type"]).value)
        symbol = ir_utils.symbol_name(fn)
        for kind, types, key in (("argument", fn_type.inputs, "arg_attrs"), ("result", fn_type.results, "res_attrs")):
            dicts = list(ir.ArrayAttr(fn.attributes[key])) if key in fn.attributes else [None] * len(types)
            for i, (t, d) in enumerate(zip(types, dicts)):
                where = f"@{symbol} {kind} {i}: {t}"
                yield (where, *_value_sharding(where, t, {} if d is None else ir.DictAttr(d), meshes))


def _value_sharding(where: str, t, attrs, meshes: _ModuleMeshes) -> tuple:
    """(global shape, the attribute as written, its HloSharding or None, devices) of one value."""
    from jaxlib.mlir import ir

    from pxla_mlir.mlir.core.pxla_attrs import MESH, TILE_DIMS
    from pxla_mlir.mlir.sharding import parse_hlo_sharding

    key = next((k for k in ("sdy.sharding", "mhlo.sharding", TILE_DIMS) if k in attrs), None)
    if key is None:
        return None, "no sharding", None, None
    text = ir.StringAttr(attrs[key]).value if key == "mhlo.sharding" else str(attrs[key])
    shape = _static_shape(t)
    if shape is None:
        return None, f"{key} = {text} (not drawn: not a tensor of static shape)", None, None
    try:
        if key == "mhlo.sharding":
            return shape, f'mhlo.sharding = "{text}"', parse_hlo_sharding(text), meshes.devices
        if key == "sdy.sharding":
            mesh, dims = parse_sdy(text, None, meshes.sdy)
            return shape, f"sdy.sharding = {text}", tiled(mesh, dims, text), math.prod(s for _, s in mesh)
        if meshes.pxla is None:
            raise CliError(f"{where}: {TILE_DIMS} without a {MESH} on the module to say the mesh axes' sizes")
        dims = [list(axes) for axes in ast.literal_eval(text)]
        sizes = dict(meshes.pxla)
        shape = tuple(n * math.prod(sizes.get(a, 1) for a in axes) for n, axes in zip(shape, dims))
        label = (f"{TILE_DIMS} = {text} (of the global {_shape_text(shape)}, over {MESH} "
                 f"{', '.join(f'{n}={s}' for n, s in meshes.pxla)})")
        return shape, label, tiled(meshes.pxla, dims, text), math.prod(sizes.values())
    except (ValueError, SyntaxError) as e:
        raise CliError(f"{where}: {key} {text}: {e}") from None


def _static_shape(t) -> tuple[int, ...] | None:
    from jaxlib.mlir import ir

    if not isinstance(t, ir.RankedTensorType):
        return None
    ranked = ir.RankedTensorType(t)
    return tuple(ranked.shape) if ranked.has_static_shape else None


def _shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape)) or "scalar"


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
