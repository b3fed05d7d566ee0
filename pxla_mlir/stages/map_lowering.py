"""A traced map's :class:`~pxla_mlir.stages.lowering.Lowering`, and the one
way a map lowers: :func:`lower_cached` of its :class:`LoweringInputs`.

pmap, xmap and ``pxla_mlir.jit`` each describe a lowering by one frozen
value (pmap's ``PmapInputs``, xmap's ``XmapInputs``): everything that
decides the module. The lowering cache's key is a digest of that value
(:mod:`.lowering_cache`) and the module is built from it alone, so nothing
can decide a lowering without being in its key. :func:`lower_cached` runs
the value's pipeline on what it imports (saving a reproducer when it
fails), or takes an equal lowering from the cache, and returns the
``Lowered`` over a :class:`MapLowering`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from jaxlib.mlir import ir

from pxla_mlir.jaxbridge.stablehlo_lowering import LOWERING_LOCK, parse_in_shared_context
from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.pass_infra import NamedPipeline, Pipeline, PipelineFailure, run_pipeline
from pxla_mlir.mlir.pass_infra.pipeline import save_reproducer
from pxla_mlir.mlir.support.stats import STATS, timed
from pxla_mlir.runtime.debug_flags import dump_stage, dumping
from pxla_mlir.runtime.executable import ShardedExecutable
from pxla_mlir.runtime.module_facts import ModuleFacts, ModuleToCompile
from pxla_mlir.stages import lowering_cache
from pxla_mlir.stages.aot import Lowered
from pxla_mlir.stages.final_module import FinalModule, compile_lowering
from pxla_mlir.stages.lowering import Layout
from pxla_mlir.stages.signature import Signature

__all__ = ["LoweringInputs", "MapLowering", "lower_cached"]


class LoweringInputs(Protocol):
    """What decides one map's lowering: a frozen value whose fields all enter the lowering cache's key.

    ``build`` imports the pxla form from the value alone and returns it with
    the hints the layout needs (plain data, kept in a cache entry: None, or
    what import placed by piece); ``layout`` is where the flat inputs and
    outputs live, from those hints (``pxla``: the imported form, None for a
    lowering from the cache) and the hoisted constants' values, which are
    arguments of the program, not part of it."""

    @property
    def pipeline(self) -> NamedPipeline: ...

    @property
    def platform(self) -> str: ...

    @property
    def cacheable(self) -> bool: ...

    def build(self) -> tuple[Any, Any]: ...

    def layout(self, hints: Any, pxla: ir.Module | None, consts: tuple) -> Layout: ...

    def jaxpr_text(self) -> str: ...


def lower_cached(inputs: LoweringInputs, *, signature: Signature, consts: Sequence = (), plan: Any = None) -> Lowered:
    """The ``Lowered`` of ``inputs``: its pipeline run on what ``inputs.build()``
    imports, unless the lowering cache holds the modules of an equal lowering
    (then jax's lowering, the import and the pipeline are skipped, and no
    module is parsed until asked for: compiling reads the entry's facts; an
    executable from the persistent cache needs no module). ``plan`` is an
    xmap's plan, for the ``Lowered``.

    A failing pipeline raises ``PipelineFailure`` with a reproducer: the
    imported module saved for ``pxla-opt`` (see ``pass_infra.reproducer``).
    A lowering from the cache imports its pxla form again only when asked
    for it (the entry keeps the final module alone)."""
    consts = tuple(consts)
    platform, recorded = inputs.platform, inputs.pipeline.recorded()
    key = lowering_cache.key(inputs) if inputs.cacheable else None
    entry = lowering_cache.lookup(key, platform) if key is not None else None
    if entry is not None:
        with timed("lowering cache"):
            layout = inputs.layout(entry.hints, None, consts)
            # Imported again when asked for (as jax lowers again whenever asked): the same module, located
            # where it was asked for.
            pxla = functools.cache(lambda: inputs.build()[0].module)
        if dumping():
            dump_stage(pxla(), "pxla")
        return Lowered(MapLowering(lambda: parse_in_shared_context(entry.final), lambda: pxla().operation,
                                   facts=entry.facts, pipeline=recorded, layout=layout,
                                   jaxpr_text=inputs.jaxpr_text, plan=plan), signature)
    imported, hints = inputs.build()
    lowering = _run_pipeline(imported, inputs.pipeline, recorded, layout=inputs.layout(hints, imported.module, consts),
                             jaxpr_text=inputs.jaxpr_text, plan=plan)
    if key is not None and not imported.keepalive and not imported.host_callbacks:
        facts = lowering.to_compile().facts  # its text stays for the compile, unless mhlo() hands the module out
        with LOWERING_LOCK:
            # The final module verified at the end of the pipeline: printed without verifying it again.
            entry = lowering_cache.Entry(ir_utils.asm_text(lowering.module.operation, debug_info=True,
                                                           assume_verified=True), facts, hints)
        lowering_cache.store(key, entry, platform)
    return Lowered(lowering, signature)


def _run_pipeline(imported, named: NamedPipeline, recorded: str, *, layout: Layout,
                  jaxpr_text: Callable[[], str] | None, plan: Any) -> MapLowering:
    STATS["lowerings"] += 1
    module = imported.module
    pxla = module.operation.clone()  # printed only if asked for
    dump_stage(pxla, "pxla")  # jax_dump_ir_to
    try:
        with timed("passes"), LOWERING_LOCK:  # the module may live in the shared lowering context
            run_pipeline(module, Pipeline.of(named, module.context), reproducer=False, verify_each=False,
                         keep_main=True)
    except PipelineFailure as e:
        # Printed only now: the copy made before the pipeline ran is what a rerun needs.
        saved = save_reproducer(pxla.get_asm(enable_debug_info=True), e.pipeline, verify_each=False)
        raise PipelineFailure(e.pipeline, e.diagnostics, saved) from None
    return MapLowering(module, pxla, pipeline=recorded, layout=layout, keepalive=imported.keepalive,
                       host_callbacks=imported.host_callbacks, jaxpr_text=jaxpr_text, plan=plan)


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
