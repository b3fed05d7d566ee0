"""What one kind of map (pmap, xmap) tells the rest of pxla_mlir.

A kind lives in its own package (``pmaps/``, ``xmaps/``) with a
``kind.py`` that defines one :class:`MapKind` instance, listed in
:mod:`.registry` with what the command line needs to know of it (its
pipeline and flags) without loading it. Everything that must know every kind iterates the
registry instead of naming them: ``pxla-mlir emit``/``run``/``explore``
(which object is a map, which flags a plain function takes),
``pxla_mlir.jit`` (which kind lowers a function holding maps) and xmap's
interpreter (which equations are other maps). The transformation rules a
kind shares with the others are its ``rules`` (:class:`.rules.MapRules`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jax.core import ShapedArray

    from pxla_mlir.runtime.executable import Device
    from pxla_mlir.stages.signature import Signature

__all__ = ["MapKind", "CliFlag", "JitBody"]


@dataclasses.dataclass(frozen=True)
class CliFlag:
    """A command-line flag that maps a plain function (``--map KIND``)."""

    field: str  # "axis_name": the flag is --axis-name
    help: str
    literal: bool = True  # its value is a Python literal (else a plain string)
    required: bool = False
    choices: tuple[str, ...] | None = None  # the values it takes, when they are few


@dataclasses.dataclass(frozen=True)
class JitBody:
    """A ``pxla_mlir.jit`` call for a kind to lower: the function's name, its
    flat arguments' global avals and donation, its call signature, and the
    jit's ``devices``, ``backend`` and pipeline ``options`` (by api name)."""

    name: str
    global_avals: tuple[ShapedArray, ...]
    donated: tuple[bool, ...]
    signature: Signature
    devices: tuple[Device, ...] | None = None
    backend: str | None = None
    options: dict[str, str] = dataclasses.field(default_factory=dict)


class MapKind:
    """A map kind's front-end hooks. Subclasses set the attributes and
    implement the methods."""

    name: str  # "pmap": the API is pxla_mlir.<name>, the CLI says --map <name>; its registry entry's key
    primitive: Any  # the jax primitive a bound map is
    function_type: type  # the MapFunction subclass the API returns
    rules: Any  # its transformation rules (maps.rules.MapRules)

    def owns(self, eqn) -> bool:
        """Is this jaxpr equation a map of this kind?"""
        return eqn.primitive is self.primitive

    def from_cli(self, fn: Callable, flags: dict, options: dict):
        """``fn`` mapped with its registry entry's command-line ``flags`` (parsed, by field) and pipeline
        ``options`` (by api name)."""
        raise NotImplementedError

    def check_example_shapes(self, fn, shapes: list[tuple]) -> tuple[int, str] | None:
        """(argument index, what is wrong) if example argument ``shapes`` cannot work for ``fn``; None if fine."""
        return None

    def lower_jit(self, jaxpr, eqns: list, jit: JitBody):
        """The ``Lowered`` of a ``pxla_mlir.jit`` call whose body (``jaxpr``) holds ``eqns``, this
        kind's maps (none, for the first kind of the registry, which lowers jit bodies without maps)."""
        raise NotImplementedError

    def environment(self) -> Hashable:
        """What a ``pxla_mlir.jit`` body's maps of this kind depend on besides its arguments (xmap: the
        mesh and loops in scope): the jit's caches are keyed by it."""
        return ()

    def register(self) -> None:
        """Installs the primitive's rules in jax's tables: transformations, lowering, eager impl."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<map kind {self.name}>"
