"""A traced map's :class:`~pxla_mlir.stages.lowering.Lowering`: pmap, xmap
and ``pxla_mlir.jit`` import a module in "pxla form" and call :func:`lower`
with it, its pipeline, its :class:`~pxla_mlir.stages.lowering.Layout`
(devices, avals and shardings of the flat inputs and outputs, donation,
hoisted constants) and its :class:`~pxla_mlir.stages.signature.Signature`
(how arguments flatten, how outputs unflatten). ``lower`` runs the pass
pipeline (saving a reproducer when it fails) and returns the ``Lowered``
over a :class:`MapLowering`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, cast

from jaxlib.mlir import ir

from pxla_mlir.jaxbridge.stablehlo_lowering import LOWERING_LOCK, parse_in_shared_context
from pxla_mlir.mlir.pass_infra import Pipeline, PipelineFailure, run_pipeline
from pxla_mlir.mlir.pass_infra.pipeline import save_reproducer
from pxla_mlir.mlir.support.stats import STATS, timed
from pxla_mlir.runtime import lowering_cache
from pxla_mlir.runtime.debug_flags import dump_stage, dumping
from pxla_mlir.runtime.executable import ShardedExecutable
from pxla_mlir.runtime.module_facts import ModuleFacts, ModuleToCompile
from pxla_mlir.stages.aot import Lowered
from pxla_mlir.stages.final_module import FinalModule, compile_lowering
from pxla_mlir.stages.lowering import Layout
from pxla_mlir.stages.signature import Signature

__all__ = ["lower", "lower_cached", "MapLowering"]


def lower(imported, *, pipeline: str, layout: Layout, signature: Signature,
          jaxpr_text: Callable[[], str] | None = None, plan: Any = None) -> Lowered:
    """Runs ``pipeline`` on an imported module (:class:`pxla_mlir.maps.pxla_form.Imported`:
    the pxla form, jax's keepalive, the host callbacks) and returns its ``Lowered``.

    A failing pipeline raises ``PipelineFailure`` with a reproducer: the
    imported module saved for ``pxla-opt`` (see ``pass_infra.reproducer``).
    """
    return Lowered(_run_pipeline(imported, pipeline=pipeline, layout=layout, jaxpr_text=jaxpr_text, plan=plan),
                   signature)


def _run_pipeline(imported, *, pipeline: str, layout: Layout, jaxpr_text: Callable[[], str] | None,
                  plan: Any) -> MapLowering:
    STATS["lowerings"] += 1
    module = imported.module
    pxla = module.operation.clone()  # printed only if asked for
    dump_stage(pxla, "pxla")  # jax_dump_ir_to
    try:
        with timed("passes"), LOWERING_LOCK:  # the module may live in the shared lowering context
            run_pipeline(module, Pipeline.cached(pipeline, module.context), reproducer=False, verify_each=False)
    except PipelineFailure as e:
        # Printed only now: the copy made before the pipeline ran is what a rerun needs.
        saved = save_reproducer(pxla.get_asm(enable_debug_info=True), e.pipeline, verify_each=False)
        raise PipelineFailure(e.pipeline, e.diagnostics, saved) from None
    return MapLowering(module, pxla, pipeline=pipeline, layout=layout, keepalive=imported.keepalive,
                       host_callbacks=imported.host_callbacks, jaxpr_text=jaxpr_text, plan=plan)


def lower_cached(key: bytes | None, build: Callable[[], Any],
                 layout_of: Callable[[Any, ir.Module | None], Layout], *, hints_of: Callable[[ir.Module], Any] | None = None,
                 platform: str, pipeline: str, signature: Signature, jaxpr_text: Callable[[], str] | None = None,
                 plan: Any = None) -> Lowered:
    """:func:`lower` of what ``build()`` imports, unless the lowering cache
    (:mod:`pxla_mlir.runtime.lowering_cache`) holds the modules of an equal
    lowering under ``key`` (None: not cacheable): then jax's lowering, the
    import and the pipeline are skipped, and no module is parsed until asked
    for (compiling reads the entry's facts; an executable from the persistent
    cache needs no module). The layout is ``layout_of(hints, pxla)``: ``hints``
    is what ``hints_of`` read from the imported pxla form (plain data, kept in
    the entry; None without ``hints_of``), ``pxla`` that form when it was just
    imported, None when the lowering came from the cache."""
    entry = lowering_cache.lookup(key, platform) if key is not None else None
    if entry is not None:
        with timed("lowering cache"):
            layout = layout_of(entry.hints, None)
            pxla = functools.cache(lambda: parse_in_shared_context(entry.pxla))
        if dumping():
            dump_stage(pxla(), "pxla")
        return Lowered(MapLowering(lambda: parse_in_shared_context(entry.final), lambda: pxla().operation,
                                   facts=entry.facts, pipeline=pipeline, layout=layout, jaxpr_text=jaxpr_text,
                                   plan=plan), signature)
    imported = build()
    hints = hints_of(imported.module) if hints_of is not None else None
    lowering = _run_pipeline(imported, pipeline=pipeline, layout=layout_of(hints, imported.module),
                             jaxpr_text=jaxpr_text, plan=plan)
    if key is not None and not imported.keepalive and not imported.host_callbacks:
        subject = lowering.to_compile()
        facts = subject.facts
        subject.forget_text()  # the compile prints the module again: it may be rewritten before (mhlo())
        with LOWERING_LOCK:
            entry = lowering_cache.Entry(cast(str, lowering.pxla.get_asm(enable_debug_info=True)),
                                         cast(str, lowering.module.operation.get_asm(enable_debug_info=True)), facts,
                                         hints)
        lowering_cache.store(key, entry, platform)
    return Lowered(lowering, signature)


class MapLowering(FinalModule):
    """What a map lowered to (a :class:`~pxla_mlir.stages.lowering.Lowering`):
    the final module, the pxla form from import, the pipeline that ran
    between them, the :class:`~pxla_mlir.stages.lowering.Layout` of its flat
    inputs and outputs, jax's keepalive and the Python callables its host
    callbacks call. ``plan`` is an xmap's plan (named axes, sizes,
    resources); None for pmap. Its executable's inputs and outputs are laid
    out as the layout says. A lowering from the cache holds how to parse its
    modules, and its final module's ``facts``, instead of the modules."""

    def __init__(self, module: ir.Module | Callable[[], ir.Module], pxla: ir.Operation | Callable[[], ir.Operation],
                 *, pipeline: str, layout: Layout, facts: ModuleFacts | None = None, keepalive: Any = None,
                 host_callbacks: Sequence = (), jaxpr_text: Callable[[], str] | None = None, plan: Any = None):
        self._to_compile = ModuleToCompile(module, facts)  # holds the module (or how to parse it)
        self._pxla = pxla  # or how to parse it, for a cached lowering
        self.pipeline = pipeline
        self.layout = layout
        self.keepalive = keepalive
        self.host_callbacks = tuple(host_callbacks)
        self.jaxpr_text = jaxpr_text  # printed only if asked for
        self.plan = plan

    @property
    def module(self) -> ir.Module:  # pyright: ignore[reportIncompatibleVariableOverride]
        return self._to_compile.module

    @property
    def pxla(self) -> ir.Operation:
        if callable(self._pxla):
            self._pxla = self._pxla()
        return self._pxla

    def to_compile(self) -> ModuleToCompile:
        return self._to_compile

    def compile(self, compiler_options: dict | None = None) -> ShardedExecutable:
        """The module compiled by XLA, wrapped for launches."""
        return compile_lowering(self, compiler_options, lambda xla: (self.layout.in_shardings,
                                                                     self.layout.out_shardings))
