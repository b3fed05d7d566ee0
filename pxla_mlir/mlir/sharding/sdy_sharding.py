"""Shardy (``sdy``) sharding text exactly as Shardy prints it.

The Shardy form of a layout names mesh axes instead of tiling devices:

* :class:`SdyMesh`: ``#sdy.mesh<["x"=2, "y"=4]>`` (in a module, the symbol
  ``sdy.mesh @mesh = <["x"=2, "y"=4]>``); devices are the mesh in row-major
  order, as in a ShardingSpec and an HLO ``<=[8]`` iota;
* :class:`SdySharding`: ``#sdy.sharding<@mesh, [{"x"}, {}, {?}], replicated={"y"}>``:
  per dimension the mesh axes splitting it, major first; a dimension is
  *closed* (``{"x"}``, ``{}``: exactly these axes) or *open* (``{"x", ?}``,
  ``{?}``: propagation may add more); ``replicated`` lists axes that must
  stay replicated (axes named nowhere are replicated too, implicitly, unless
  an open dimension takes them).

``str()`` is Shardy's canonical text: its parser reads it and its printer
prints it back unchanged (``tests/runtime/test_sdy_sharding.py`` checks this against
Shardy's own parser/printer, as ``test_sharding_xla_oracle.py`` checks HLO
strings against XLA). Pure Python: no MLIR context needed.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence

from pxla_mlir.mlir.sharding.mesh import AbstractMesh, MeshError, dims_from_mapping
from pxla_mlir.mlir.sharding.spec import Chunked, Replicated, ShardedAxis, ShardingSpec, ShardingSpecError, Unstacked

__all__ = ["SdyMesh", "SdyDim", "SdySharding", "manual_axes", "per_value", "quote", "symbol_ref", "mesh_of",
           "of_mapping", "of_spec"]

_BARE_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")


def quote(text: str) -> str:
    """An MLIR string literal as MLIR prints it: ``\\`` doubled, ``"`` and
    non-printable bytes (UTF-8) as ``\\XX``."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"' or not 0x20 <= byte < 0x7F:
            out.append(f"\\{byte:02X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def symbol_ref(name: str) -> str:
    """``@mesh``, or ``@"my mesh"`` where the name is not an identifier."""
    return "@" + (name if _BARE_SYMBOL.fullmatch(name) else quote(name))


def _axes(names: Sequence[str], open_: bool = False) -> str:
    items = [quote(a) for a in names] + (["?"] if open_ else [])
    return "{" + ", ".join(items) + "}"


@dataclasses.dataclass(frozen=True)
class SdyMesh:
    """Named mesh axes and their sizes, major first."""

    axes: tuple[tuple[str, int], ...]

    def __init__(self, axes: Iterable[tuple[str, int]]):
        object.__setattr__(self, "axes", tuple((str(n), int(s)) for n, s in axes))

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.axes)

    @property
    def size(self) -> int:
        out = 1
        for _, s in self.axes:
            out *= s
        return out

    def body(self) -> str:
        return "<[" + ", ".join(f"{quote(n)}={s}" for n, s in self.axes) + "]>"

    def symbol(self, name: str = "mesh") -> str:
        """The module-level op: ``sdy.mesh @mesh = <["x"=2, "y"=4]>``."""
        return f"sdy.mesh {symbol_ref(name)} = {self.body()}"

    def __str__(self) -> str:
        return "#sdy.mesh" + self.body()


@dataclasses.dataclass(frozen=True)
class SdyDim:
    """One dimension's sharding: mesh axes (major first), closed or open."""

    axes: tuple[str, ...] = ()
    closed: bool = True

    def __str__(self) -> str:
        return _axes(self.axes, open_=not self.closed)


@dataclasses.dataclass(frozen=True)
class SdySharding:
    """``#sdy.sharding<@mesh_name, [dims...], replicated={...}>``.

    ``mesh`` is the mesh the axes belong to; ``mesh_name`` the symbol that
    names it in a module, or None to inline the mesh
    (``#sdy.sharding<mesh<["x"=2]>, [{"x"}]>``).
    """

    mesh: SdyMesh
    dims: tuple[SdyDim, ...]
    replicated: tuple[str, ...] = ()
    mesh_name: str | None = "mesh"

    def __post_init__(self):
        names = self.mesh.axis_names
        used = [a for d in self.dims for a in d.axes] + list(self.replicated)
        unknown = [a for a in used if a not in names]
        if unknown:
            raise ValueError(f"mesh axis {unknown[0]!r} is not in the mesh {self.mesh}")
        twice = sorted({a for a in used if used.count(a) > 1})
        if twice:
            raise ValueError(f"mesh axis {twice[0]!r} is used more than once in one sharding")
        # Shardy orders replicated axes like the mesh (its verifier insists).
        object.__setattr__(self, "replicated", tuple(a for a in names if a in self.replicated))

    @property
    def open_dims(self) -> tuple[int, ...]:
        return tuple(i for i, d in enumerate(self.dims) if not d.closed)

    def body(self) -> str:
        """The part inside ``#sdy.sharding`` (also an entry of ``in_shardings=[...]``)."""
        mesh = symbol_ref(self.mesh_name) if self.mesh_name is not None else "mesh" + self.mesh.body()
        text = f"{mesh}, [" + ", ".join(map(str, self.dims)) + "]"
        if self.replicated:
            text += ", replicated=" + _axes(self.replicated)
        return f"<{text}>"

    def __str__(self) -> str:
        return "#sdy.sharding" + self.body()


def per_value(shardings: Sequence[SdySharding]) -> str:
    """``#sdy.sharding_per_value<[<@mesh, ...>, ...]>`` (a manual computation's in/out shardings)."""
    return "#sdy.sharding_per_value<[" + ", ".join(s.body() for s in shardings) + "]>"


def manual_axes(axes: Sequence[str]) -> str:
    """``#sdy<manual_axes{"x", "y"}>`` (a manual computation's manual axes)."""
    return "#sdy<manual_axes" + _axes(axes) + ">"


# -- encoders: the vocabulary's layouts as Shardy shardings ------------------------------------------

def mesh_of(mesh: AbstractMesh) -> SdyMesh:
    """The Shardy mesh: these axes, in this order (``#sdy.mesh<["x"=2, "y"=4]>``)."""
    return SdyMesh(zip(mesh.axis_names, mesh.axis_sizes))


def of_mapping(mesh: AbstractMesh, ndim: int, mapping: Mapping[str, int], open_dims: Iterable[int] = (),
               mesh_name: str | None = "mesh") -> SdySharding:
    """Shardy sharding of a global value split by ``mapping``: closed
    dimensions, except ``open_dims`` (free for propagation, ``{?}``);
    unmapped axes are replicated implicitly."""
    mesh.check_mapping(mapping, ndim)
    open_dims = set(open_dims)
    bad = sorted(d for d in open_dims if not 0 <= d < ndim or d in mapping.values())
    if bad:
        raise MeshError(f"dimension {bad[0]} cannot be open: it is out of range or split by a mesh axis")
    dims = tuple(SdyDim(tuple(axes), d not in open_dims) for d, axes in enumerate(dims_from_mapping(mapping, ndim)))
    return SdySharding(mesh_of(mesh), dims, (), mesh_name)


def of_spec(spec: ShardingSpec, axis_names: Sequence[str] | None = None, mesh_name: str | None = "mesh") -> SdySharding:
    """The Shardy sharding of the *global* array on a mesh whose axes are
    the spec's mesh dimensions (named ``axis_names``, default ``a0``,
    ``a1``, ...): each dimension lists the mesh axes of its chunks, major
    first, all closed; ``Replicated`` mesh dimensions are listed in
    ``replicated={...}``. ``mesh_name=None`` inlines the mesh."""
    shape = spec.mesh_shape
    names = tuple(axis_names) if axis_names is not None else tuple(f"a{i}" for i in range(len(shape)))
    if len(names) != len(shape):
        raise ShardingSpecError(f"{spec!r} has {len(shape)} mesh dimensions but {len(names)} axis names "
                                f"were given: {names}")
    if len(set(names)) != len(names):
        raise ShardingSpecError(f"axis names {names} repeat a name")
    sharded_to_mesh = {a.axis: m for m, a in enumerate(spec.mesh_mapping) if isinstance(a, ShardedAxis)}
    dims, next_axis = [], 0
    for dim, s in enumerate(spec.sharding):
        if isinstance(s, Unstacked):
            raise ShardingSpecError(f"dimension {dim} is {s!r}: a Shardy sharding cannot drop a dimension; "
                                    f"use Chunked([{s.size}]) (each shard keeps a size-1 dimension)")
        axes = []
        for _ in (s.chunks if isinstance(s, Chunked) else ()):
            axes.append(names[sharded_to_mesh[next_axis]])
            next_axis += 1
        dims.append(SdyDim(tuple(axes)))
    replicated = tuple(n for n, a in zip(names, spec.mesh_mapping) if isinstance(a, Replicated))
    return SdySharding(SdyMesh(zip(names, shape)), tuple(dims), replicated, mesh_name)
