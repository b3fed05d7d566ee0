"""One reader of the layout the pxla form declares on function boundaries.

Arguments and results of ``func.func`` say where their values live with
``pxla.dims`` (mesh axes per dimension of the global value, against
``pxla.mesh``), ``pxla.tile_dims`` (the same, for a per-device tile of a
replica-mode ``@main``) or ``pxla.sharding_spec`` (a serialized
ShardingSpec). :func:`rewrite_boundaries` visits every value that carries
one, and :meth:`BoundaryValue.read` turns its attributes into a
:class:`Declared` layout, checked against the value's type and removed from
its attributes; each output form's annotate pass then encodes it (GSPMD's
``mhlo.sharding``, Shardy's ``sdy.sharding``) and writes what it needs.

jax's donations live on the same boundary: :func:`donate_mismatched_aliases`
keeps them valid when a rewrite changes a value's layout or type.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import ir_utils, pxla_attrs
from pxla_mlir.mlir.core.diagnostics import PassError
from pxla_mlir.mlir.core.pxla_attrs import (
    ALIASING_OUTPUT,
    BUFFER_DONOR,
    DIMS,
    MESH,
    SHARDING_SPEC,
    TILE_DIMS,
    DimsSpec,
    mesh_of,
    parse_dims,
    string_value,
)
from pxla_mlir.mlir.sharding import ShardingSpec, ShardingSpecError
from pxla_mlir.mlir.sharding.mesh import AbstractMesh, MeshError

__all__ = ["KEYS", "Declared", "DeclaredDims", "DeclaredSpec", "BoundaryValue", "donate_mismatched_aliases", "rewrite_boundaries",
           "types_differ"]

KEYS = (DIMS, SHARDING_SPEC, TILE_DIMS)


@dataclasses.dataclass(frozen=True)
class DeclaredDims:
    """A boundary value's layout declared as ``dims`` over ``mesh`` (from
    ``pxla.dims``, or ``pxla.tile_dims`` when ``tile``)."""

    shape: tuple[int, ...]
    mesh: AbstractMesh
    dims: DimsSpec
    tile: bool = False


@dataclasses.dataclass(frozen=True)
class DeclaredSpec:
    """A boundary value's layout declared as a serialized ShardingSpec."""

    shape: tuple[int, ...]
    spec: ShardingSpec
    mesh: AbstractMesh | None = None  # the module's pxla.mesh, if it has one


# Two classes rather than one with optional fields, so that a type checker
# knows which fields a branch may read.
Declared = DeclaredDims | DeclaredSpec


@dataclasses.dataclass
class BoundaryValue:
    """One argument or result of ``fn`` with pxla layout attributes; ``entries``
    are its attributes (what an annotate pass adds goes there)."""

    fn: ir.Operation
    module: ir.Operation
    index: int
    is_arg: bool
    type: ir.Type
    entries: dict

    @property
    def what(self) -> str:
        return f"{'argument' if self.is_arg else 'result'} {self.index}"

    @property
    def is_tile(self) -> bool:
        return TILE_DIMS in self.entries

    def read(self) -> Declared:
        """The declared layout, checked; the pxla attributes leave ``entries``."""
        fn, what, entries = self.fn, self.what, self.entries
        if DIMS in entries and SHARDING_SPEC in entries:
            raise PassError(fn, f"{what} has both {DIMS} and {SHARDING_SPEC}; keep one")
        if not isinstance(self.type, ir.RankedTensorType):
            raise PassError(fn, f"{what}: pxla shardings need a ranked tensor, got {self.type}")
        shape = tuple(ir.RankedTensorType(self.type).shape)
        if TILE_DIMS in entries or DIMS in entries:
            key = TILE_DIMS if TILE_DIMS in entries else DIMS
            mesh = mesh_of(fn, self.module)
            dims = parse_dims(entries.pop(key), len(shape), mesh, fn, what, key)
            if key == DIMS:
                try:
                    mesh.tile_shape(shape, dims.mapping, what)
                except MeshError as e:
                    raise PassError(fn, str(e)) from None
            return DeclaredDims(shape, mesh, dims, tile=key == TILE_DIMS)
        has_mesh = MESH in fn.attributes or MESH in self.module.attributes
        mesh = mesh_of(fn, self.module) if has_mesh else None
        text = string_value(entries.pop(SHARDING_SPEC), SHARDING_SPEC, fn)
        try:
            spec = ShardingSpec.parse(text)
            spec.shard_shape(shape)
        except ShardingSpecError as e:
            raise PassError(fn, f"{what}: {e}") from None
        return DeclaredSpec(shape, spec, mesh)


def rewrite_boundaries(module: ir.Operation, rewrite: Callable[[BoundaryValue], None]) -> None:
    """Calls ``rewrite`` on every function argument and result that carries a
    pxla layout attribute, then writes the (changed) attributes back."""
    for fn in ir_utils.functions(module):
        ftype = pxla_attrs.function_type(fn)
        for key, types in (("arg_attrs", ftype.inputs), ("res_attrs", ftype.results)):
            if key not in fn.attributes:
                continue
            dicts = pxla_attrs.boundary_attrs(fn, key)
            for index, (entries, t) in enumerate(zip(dicts, types)):
                if any(k in entries for k in KEYS):
                    rewrite(BoundaryValue(fn, module, index, key == "arg_attrs", t, entries))
            ir_utils.set_boundary_attrs(fn, key, dicts)


def donate_mismatched_aliases(arg_dicts: Sequence[dict[str, ir.Attribute]],
                              differs: Callable[[int, int], bool]) -> bool:
    """Makes each argument aliased (``tf.aliasing_output``) to a result it
    ``differs(argument, result)`` from only a buffer donor
    (``jax.buffer_donor``): jax aliased values of equal per-device types, and
    a layout or a rewrite of the boundary (tiles, pieces) may give the two
    buffers different sizes. Rewrites ``arg_dicts`` in place (needs a live
    context); returns whether it changed one."""
    changed = False
    for index, entries in enumerate(arg_dicts):
        alias = entries.get(ALIASING_OUTPUT)
        if isinstance(alias, ir.IntegerAttr) and differs(index, ir.IntegerAttr(alias).value):
            del entries[ALIASING_OUTPUT]
            entries[BUFFER_DONOR] = ir.BoolAttr.get(True)
            changed = True
    return changed


def types_differ(in_types: Sequence[ir.Type], out_types: Sequence[ir.Type]) -> Callable[[int, int], bool]:
    """``differs`` for :func:`donate_mismatched_aliases`: the argument's type is not its result's."""
    return lambda arg, res: arg < len(in_types) and 0 <= res < len(out_types) and in_types[arg] != out_types[res]
