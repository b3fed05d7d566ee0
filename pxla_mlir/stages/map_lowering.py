"""A traced map's :class:`~pxla_mlir.stages.lowering.Lowering`: pmap, xmap
and ``pxla_mlir.jit`` import a module in "pxla form" and call :func:`lower`
with it, its pipeline, its :class:`~pxla_mlir.stages.lowering.Layout`
(devices, avals and shardings of the flat inputs and outputs, donation,
hoisted constants) and its :class:`~pxla_mlir.stages.signature.Signature`
(how arguments flatten, how outputs unflatten). ``lower`` runs the pass
pipeline (saving a reproducer when it fails) and returns the ``Lowered``
over a :class:`MapLowering`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from jaxlib.mlir import ir

from pxla_mlir.jaxbridge.stablehlo_lowering import LOWERING_LOCK
from pxla_mlir.mlir.pass_infra import Pipeline, PipelineFailure, run_pipeline
from pxla_mlir.mlir.pass_infra.pipeline import save_reproducer
from pxla_mlir.mlir.support.stats import STATS, timed
from pxla_mlir.runtime.debug_flags import dump_stage
from pxla_mlir.runtime.executable import ShardedExecutable
from pxla_mlir.stages.aot import Lowered
from pxla_mlir.stages.final_module import FinalModule, compile_lowering
from pxla_mlir.stages.lowering import Layout
from pxla_mlir.stages.signature import Signature

__all__ = ["lower", "MapLowering"]


def lower(imported, *, pipeline: str, layout: Layout, signature: Signature,
          jaxpr_text: Callable[[], str] | None = None, plan: Any = None) -> Lowered:
    """Runs ``pipeline`` on an imported module (:class:`pxla_mlir.maps.pxla_form.Imported`:
    the pxla form, jax's keepalive, the host callbacks) and returns its ``Lowered``.

    A failing pipeline raises ``PipelineFailure`` with a reproducer: the
    imported module saved for ``pxla-opt`` (see ``pass_infra.reproducer``).
    """
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
    lowering = MapLowering(module, pxla, pipeline=pipeline, layout=layout, keepalive=imported.keepalive,
                           host_callbacks=imported.host_callbacks, jaxpr_text=jaxpr_text, plan=plan)
    return Lowered(lowering, signature)


class MapLowering(FinalModule):
    """What a map lowered to (a :class:`~pxla_mlir.stages.lowering.Lowering`):
    the final module, the pxla form from import, the pipeline that ran
    between them, the :class:`~pxla_mlir.stages.lowering.Layout` of its flat
    inputs and outputs, jax's keepalive and the Python callables its host
    callbacks call. ``plan`` is an xmap's plan (named axes, sizes,
    resources); None for pmap. Its executable's inputs and outputs are laid
    out as the layout says."""

    def __init__(self, module: ir.Module, pxla: ir.Operation, *, pipeline: str, layout: Layout,
                 keepalive: Any = None, host_callbacks: Sequence = (), jaxpr_text: Callable[[], str] | None = None,
                 plan: Any = None):
        self.module, self.pxla = module, pxla
        self.pipeline = pipeline
        self.layout = layout
        self.keepalive = keepalive
        self.host_callbacks = tuple(host_callbacks)
        self.jaxpr_text = jaxpr_text  # printed only if asked for
        self.plan = plan

    def compile(self, compiler_options: dict | None = None) -> ShardedExecutable:
        """The module compiled by XLA, wrapped for launches."""
        return compile_lowering(self, compiler_options, lambda xla: (self.layout.in_shardings,
                                                                     self.layout.out_shardings))
