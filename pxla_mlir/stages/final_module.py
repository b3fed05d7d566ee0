"""The work every :class:`~pxla_mlir.stages.lowering.Lowering` does on its
final module, whatever made it: the module as text and as IR in each
dialect, and compiling it for launches."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, cast

from jaxlib.mlir import ir

from pxla_mlir.distributed.program_check import check_before_launch
from pxla_mlir.jaxbridge.jax_internals import hlo_text
from pxla_mlir.jaxbridge.stablehlo_lowering import LOWERING_LOCK
from pxla_mlir.mlir.pipelines import to_stablehlo
from pxla_mlir.mlir.support.stats import timed
from pxla_mlir.runtime.callbacks import GuardedCallbacks, callback_results
from pxla_mlir.runtime.compile import compile_program, to_xla_computation
from pxla_mlir.runtime.debug_flags import compiling
from pxla_mlir.runtime.executable import ShardedExecutable, device_shapes, map_description
from pxla_mlir.runtime.module_facts import ModuleToCompile
from pxla_mlir.stages.lowering import Layout, Lowering

__all__ = ["FinalModule", "module_text", "module_ir", "compile_lowering"]

_DIALECTS = ("mhlo", "stablehlo", "hlo")


def _dialect(dialect: str | None) -> str:
    if dialect is None:
        return "mhlo"
    if dialect not in _DIALECTS:
        raise ValueError(f"unknown dialect: {dialect!r}; use one of {', '.join(map(repr, _DIALECTS))} (or None "
                         f"for mhlo)")
    return dialect


def module_text(module: ir.Module, dialect: str | None = None, *, debug_info: bool = False) -> str:
    if _dialect(dialect) == "hlo":
        return hlo_text(module_ir(module, "hlo"), debug_info=debug_info)
    return cast(str, module_ir(module, dialect).operation.get_asm(enable_debug_info=debug_info))  # text, not bytes


def module_ir(module: ir.Module, dialect: str | None = None) -> Any:
    """``module`` itself for "mhlo" (the default), a converted copy for
    "stablehlo", XLA's ``XlaComputation`` for "hlo"."""
    dialect = _dialect(dialect)
    if dialect == "mhlo":
        return module
    if dialect == "stablehlo":
        return to_stablehlo(module)
    return to_xla_computation(module)


#: How an executable's inputs and outputs are laid out, given the executable.
ShardingsOf = Callable[[Any], tuple[Sequence, Sequence]]


class FinalModule:
    """What a lowering answers from its final module and its :class:`Layout`
    alone: the part both implementations of the protocol share."""

    module: ir.Module
    layout: Layout

    @property
    def devices(self) -> Sequence:
        return self.layout.devices

    @property
    def in_avals(self) -> Sequence:
        return self.layout.in_avals

    @property
    def out_avals(self) -> Sequence:
        return self.layout.out_avals

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        return module_text(self.module, dialect, debug_info=debug_info)

    def compiler_ir(self, dialect: str | None = None) -> Any:
        if _dialect(dialect) == "mhlo":  # the module itself, which may be rewritten in place: printed anew
            self.to_compile().forget_text()
        return module_ir(self.module, dialect)

    def mhlo(self) -> ir.Module:
        self.to_compile().forget_text()  # handed out to be rewritten, perhaps: printed anew at the next compile
        return self.module

    def to_compile(self) -> ModuleToCompile:
        """The final module as compiling reads it."""
        return ModuleToCompile(self.module)


def compile_lowering(lowering: Lowering, compiler_options: dict | None,
                     executable_shardings: ShardingsOf) -> ShardedExecutable:
    """``lowering``'s module compiled by XLA, wrapped for launches with its
    inputs and outputs laid out as ``executable_shardings`` says. Reads the
    module only through :meth:`~FinalModule.to_compile`: a lowering that knows
    its module's facts is launched from a cached executable without it."""
    subject = lowering.to_compile()
    try:  # the text is printed once for this compile, and again for the next (the module may be rewritten)
        return _compile_and_wrap(lowering, subject, compiler_options, executable_shardings)
    finally:
        subject.forget_text()


def _compile_and_wrap(lowering: Lowering, subject: ModuleToCompile, compiler_options: dict | None,
                      executable_shardings: ShardingsOf) -> ShardedExecutable:
    layout, facts = lowering.layout, subject.facts
    what = map_description(facts.name)
    callbacks = None
    if lowering.host_callbacks:  # none may raise into XLA (runtime/callbacks.py)
        with LOWERING_LOCK:
            callbacks = GuardedCallbacks(lowering.host_callbacks, callback_results(subject.module), what)
    expected = (device_shapes(layout.in_avals, layout.in_shardings),
                device_shapes(layout.out_avals, layout.out_shardings))
    # Closed-over arrays are arguments: closures over other values of their shapes lower to the same
    # program and share its executable, unless jax's keepalive or host callbacks tie it to this lowering.
    with timed("compile"):
        program = compile_program(subject, layout.devices, compiler_options=compiler_options,
                                  host_callbacks=callbacks.callables if callbacks else (), expected=expected,
                                  share=not (lowering.keepalive or callbacks),
                                  logged=lambda name: compiling(name, layout.in_avals, layout.in_shardings))
    xla = program.xla
    in_shardings, out_shardings = executable_shardings(xla)
    placed = dataclasses.replace(layout, in_shardings=in_shardings, out_shardings=out_shardings)
    # Multi-process: every launch agrees on the program with the other processes (distributed/program_check.py).
    return ShardedExecutable(xla, placed, keepalive=(lowering.keepalive, callbacks, program), callbacks=callbacks,
                             agreement=check_before_launch(lowering), what=what, replicas=facts.replicas > 1)
