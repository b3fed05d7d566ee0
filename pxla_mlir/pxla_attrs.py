"""The ``pxla.*`` attributes that import emits and passes read.

* ``pxla.mesh = "x=2,y=4"``: mesh axis names and sizes, major first (on the
  module, or on a placeholder op to override it);
* ``pxla.dims = [["x"], [], "?"]``: for each dimension of a value, the mesh
  axes that split it (major first), ``[]`` for not split, ``"?"`` for
  unspecified (XLA's propagation decides);
* ``pxla.manual_axes = ["x"]``: mesh axes that are manual in a region;
* ``pxla.sharding_spec = "ShardingSpec(...)"``: a serialized ShardingSpec.

Helpers raise :class:`PassError` located at the op that carries the attribute.
"""

from __future__ import annotations

import dataclasses
import re

from jaxlib.mlir import ir

from .pass_infra import PassError
from .sharding.mesh import AbstractMesh, MeshError, mapping_from_dims

UNSPECIFIED = "?"
_MESH_ITEM = re.compile(r"^\s*([A-Za-z_][\w]*)\s*=\s*(\d+)\s*$")


def format_mesh(mesh: AbstractMesh) -> str:
    return ",".join(f"{n}={s}" for n, s in mesh.shape.items())


def parse_mesh(text: str, where) -> AbstractMesh:
    names, sizes = [], []
    for item in text.split(","):
        m = _MESH_ITEM.match(item)
        if not m:
            raise PassError(where, f"bad pxla.mesh {text!r}: expected comma-separated name=size, e.g. \"x=2,y=4\"")
        names.append(m.group(1))
        sizes.append(int(m.group(2)))
    try:
        return AbstractMesh(sizes, names)
    except MeshError as e:
        raise PassError(where, f"bad pxla.mesh {text!r}: {e}") from None


def mesh_of(op: ir.Operation, module: ir.Operation) -> AbstractMesh:
    """The op's own ``pxla.mesh``, else the module's."""
    for holder in (op, module):
        if "pxla.mesh" in holder.attributes:
            return parse_mesh(_string(holder.attributes["pxla.mesh"], "pxla.mesh", holder), holder)
    raise PassError(op, "no pxla.mesh on the op or the module; add e.g. pxla.mesh = \"x=2,y=4\" to the module")


def _string(attr: ir.Attribute, name: str, where) -> str:
    if not isinstance(attr, ir.StringAttr):
        raise PassError(where, f"{name} must be a string, got {attr}")
    return ir.StringAttr(attr).value


def string_list(attr: ir.Attribute, name: str, where) -> list[str]:
    if not isinstance(attr, ir.ArrayAttr):
        raise PassError(where, f"{name} must be an array of strings, got {attr}")
    return [_string(a, name, where) for a in ir.ArrayAttr(attr)]


@dataclasses.dataclass(frozen=True)
class DimsSpec:
    """A parsed ``pxla.dims``: mesh axes per dimension, and unspecified dims."""

    dims: tuple[tuple[str, ...], ...]
    unspecified: frozenset[int]

    @property
    def mapping(self) -> dict[str, int]:
        return mapping_from_dims(self.dims)

    def backend_config(self) -> str | None:
        if not self.unspecified:
            return None
        return "unspecified_dims=[" + ",".join(map(str, sorted(self.unspecified))) + "]"


def parse_dims(attr: ir.Attribute, rank: int, mesh: AbstractMesh, where, what: str = "value") -> DimsSpec:
    if not isinstance(attr, ir.ArrayAttr):
        raise PassError(where, f"pxla.dims must be an array with one entry per dimension, got {attr}")
    entries = list(ir.ArrayAttr(attr))
    if len(entries) != rank:
        raise PassError(where, f"pxla.dims has {len(entries)} entries but the {what} has rank {rank}")
    dims, unspecified = [], set()
    for d, entry in enumerate(entries):
        if isinstance(entry, ir.StringAttr) and ir.StringAttr(entry).value == UNSPECIFIED:
            unspecified.add(d)
            dims.append(())
        else:
            dims.append(tuple(string_list(entry, f"pxla.dims entry {d}", where)))
    spec = DimsSpec(tuple(dims), frozenset(unspecified))
    try:
        mesh.check_mapping(spec.mapping, rank, what)
    except MeshError as e:
        raise PassError(where, str(e)) from None
    return spec
