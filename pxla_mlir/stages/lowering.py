"""What the stage objects stand on: the :class:`Lowering` protocol, as jax's
``Lowered`` stands on its ``Lowering``, and the :class:`Layout` of a
program's flat inputs and outputs. Two implementations:
:class:`~pxla_mlir.stages.map_lowering.MapLowering` (a traced map, lowered by
its pipeline) and :class:`~pxla_mlir.stages.text_module.TextLowering` (a
module read from text)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from jaxlib.mlir import ir

from pxla_mlir.runtime.executable import ShardedExecutable

if TYPE_CHECKING:
    from jax.core import ShapedArray
    from jax.sharding import Sharding

    from pxla_mlir.runtime.executable import Device
    from pxla_mlir.runtime.module_facts import ModuleToCompile

__all__ = ["Layout", "Lowering"]


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a lowered map's flat inputs and outputs live.

    ``consts`` are values hoisted out of the body: the first flat inputs,
    supplied by ``Compiled`` itself (``in_avals``/``in_shardings``/``donated``
    include them). ``donated`` flags the inputs whose buffers the executable
    consumes.
    """

    # Sequences in, tuples stored (__post_init__).
    devices: Sequence[Device]
    in_avals: Sequence[ShapedArray]
    out_avals: Sequence[ShapedArray]
    in_shardings: Sequence[Sharding | None]  # None: XLA's choice (a module read from text, before compiling)
    out_shardings: Sequence[Sharding | None]
    donated: Sequence[bool] = ()
    consts: Sequence = ()  # the hoisted constants' values

    def __post_init__(self):
        for name in ("devices", "in_avals", "out_avals", "in_shardings", "out_shardings", "consts"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "donated", tuple(self.donated) or (False,) * len(self.in_avals))


class Lowering(Protocol):
    """What a program lowered to, and the work of compiling it: the final
    module, the pxla form it came from, the pipeline that ran between them,
    the :class:`Layout` of its flat inputs and outputs, jax's keepalive and
    the Python callables its host callbacks call (by index, handed to XLA at
    compile time). ``plan`` is an xmap's plan (named axes, sizes,
    resources), None otherwise. The stage objects wrap it (jax's
    ``Lowered`` over its ``Lowering``)."""

    @property
    def module(self) -> ir.Module: ...

    @property
    def pxla(self) -> ir.Operation: ...

    @property
    def pipeline(self) -> str: ...

    @property
    def layout(self) -> Layout: ...

    @property
    def keepalive(self) -> Any: ...

    @property
    def host_callbacks(self) -> tuple: ...

    @property
    def jaxpr_text(self) -> Callable[[], str] | None: ...

    @property
    def plan(self) -> Any: ...

    @property
    def devices(self) -> Sequence: ...

    @property
    def in_avals(self) -> Sequence: ...

    @property
    def out_avals(self) -> Sequence: ...

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str: ...

    def compiler_ir(self, dialect: str | None = None) -> Any: ...

    def mhlo(self) -> ir.Module: ...

    def to_compile(self) -> ModuleToCompile:
        """The final module as compiling reads it (:mod:`pxla_mlir.runtime.module_facts`)."""
        ...

    def compile(self, compiler_options: dict | None = None) -> ShardedExecutable:
        """The module compiled by XLA, wrapped for launches."""
        ...
