"""Shardy (``sdy``) in modules: mesh symbols, sharding attributes, and which
sharding dialect a module is written in (jax-free).

The Shardy form of a partition-mode module carries ``sdy.mesh @mesh = <[...]>``
symbols, ``sdy.sharding`` on function arguments and results, and
``sdy.manual_computation`` regions; the GSPMD form carries ``mhlo.sharding``
strings and the ``@Sharding`` / ``@SPMDFullToShardShape`` /
``@SPMDShardToFullShape`` custom calls. XLA reads only one of the two per
compile (``use_shardy_partitioner``): :func:`uses_shardy` tells which.
"""

from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import sdy

from pxla_mlir.mlir.core import ir_utils, pxla_attrs
from pxla_mlir.mlir.core.diagnostics import PassError
from pxla_mlir.mlir.sharding import sdy_sharding
from pxla_mlir.mlir.sharding.mesh import AbstractMesh
from pxla_mlir.mlir.sharding.sdy_sharding import SdyMesh, SdySharding, manual_axes, per_value  # noqa: F401 (re-exported)

SHARDING = "sdy.sharding"
MESH_OP = "sdy.mesh"
MANUAL_COMPUTATION = "sdy.manual_computation"
#: The first mesh symbol's name (jax's too).
MESH_NAME = "mesh"
#: What the GSPMD form writes (silently ignored or rejected by XLA in a Shardy module).
GSPMD_SHARDING = "mhlo.sharding"
GSPMD_TARGETS = ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape")


def attribute(sharding: SdySharding) -> ir.Attribute:
    """The ``#sdy.sharding`` attribute of a sharding (needs a live context)."""
    return ir.Attribute.parse(str(sharding))


def mesh_ops(module: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in module.regions[0].blocks[0].operations if op.operation.name == MESH_OP]


def read_mesh(op: ir.Operation) -> SdyMesh:
    return read_mesh_attr(op.attributes["mesh"])


def read_mesh_attr(attr: ir.Attribute) -> SdyMesh:
    """The axes of a ``#sdy.mesh`` attribute (its ``device_ids``: :func:`mesh_device_ids`)."""
    axes = sdy.MeshAttr(attr).axes
    return SdyMesh([(sdy.MeshAxisAttr(a).name, sdy.MeshAxisAttr(a).size) for a in axes])


def mesh_device_ids(attr: ir.Attribute) -> list[int]:
    """The explicit ``device_ids`` of a ``#sdy.mesh`` attribute ([] for the
    row-major default): one id for a maximal mesh ``<[], device_ids=[N]>``."""
    return [int(i) for i in sdy.MeshAttr(attr).device_ids]


def inline_meshes(attr: ir.Attribute) -> list[ir.Attribute]:
    """The ``#sdy.mesh`` attributes written inside a sharding attribute
    (``#sdy.sharding<mesh<[], device_ids=[2]>, []>``, or per value), not
    those it names by symbol; [] for any other attribute."""
    if sdy.TensorShardingPerValueAttr.isinstance(attr):
        shardings = list(sdy.TensorShardingPerValueAttr(attr).shardings)
    elif sdy.TensorShardingAttr.isinstance(attr):
        shardings = [attr]
    else:
        return []
    found = [sdy.TensorShardingAttr(s).mesh_or_ref for s in shardings]
    return [m for m in found if sdy.MeshAttr.isinstance(m)]


def meshes(module: ir.Operation) -> dict[str, SdyMesh]:
    """The module's ``sdy.mesh`` symbols by name, in module order."""
    # sdy.mesh's verifier requires its sym_name
    return {ir.StringAttr(op.attributes["sym_name"]).value: read_mesh(op) for op in mesh_ops(module)}


def add_mesh(module: ir.Operation, mesh: SdyMesh, name: str) -> None:
    """Adds ``sdy.mesh @name`` after the module's other meshes (at the top)."""
    existing = mesh_ops(module)
    block = module.regions[0].blocks[0]
    point = ir.InsertionPoint(existing[-1]) if existing else ir.InsertionPoint.at_block_begin(block)
    with point, module.location:
        op = sdy.MeshOp(name, ir.Attribute.parse(str(mesh)))
    if existing:
        op.operation.move_after(existing[-1])


def mesh_name_for(module: ir.Operation, mesh: AbstractMesh, where) -> str:
    """The name of the ``sdy.mesh`` symbol with exactly ``mesh``'s axes."""
    wanted = sdy_sharding.mesh_of(mesh)
    for name, found in meshes(module).items():
        if found == wanted:
            return name
    raise PassError(where, f"no sdy.mesh symbol with the axes of pxla.mesh {wanted.body()}; run pxla-add-sdy-mesh "
                           f"first")


def uses_shardy(module: ir.Operation, named_ops: list[tuple[ir.Operation, str]] | None = None) -> bool:
    """True when the module is written for Shardy: it has an ``sdy`` op or an
    ``sdy.sharding`` attribute (on an op or a function boundary).
    ``named_ops``: ``(op, name)`` of the module's ops when the caller has them;
    the sdy ops, the functions and the ops carrying an sdy.sharding suffice."""
    if named_ops is None:
        named_ops = ir_utils.walk_selected(module, lambda n: n.startswith("sdy.") or n == "func.func",
                                           attrs=(SHARDING,))
    for op, name in named_ops:
        if name.startswith("sdy."):
            return True
        if SHARDING in op.attributes:
            return True
        if name == "func.func":
            for key in ("arg_attrs", "res_attrs"):
                if key in op.attributes and any(SHARDING in d for d in pxla_attrs.boundary_attrs(op, key)):
                    return True
    return False
