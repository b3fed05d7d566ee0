"""Named pipelines: lists of passes expanded in place by the pipeline parser.

A pipeline's ``elements()`` returns pipeline text; the comments say why the
order is what it is. ``pxla-opt --dump-pass-pipeline`` shows the expansion.

The pipelines' typed options are the single declaration of pmap's ``mode``
and ``unshard``, xmap's ``lowering`` and both maps' ``sharding_dialect``
(``shardings=`` in the API): the Python API validates against them
(:func:`configure`), the command line takes its choices from them, and an
instance is the options value itself (``PmapPipeline(mode="partition")``).

``sharding-dialect`` picks how partition-mode modules describe their layout
to XLA: ``sdy`` (Shardy: ``sdy.mesh``, ``sdy.sharding``,
``sdy.manual_computation``; the default, as XLA in jaxlib 0.10.2 compiles it
without warnings) or ``gspmd`` (``mhlo.sharding`` strings and the
``@Sharding``/``@SPMDFullToShardShape``/``@SPMDShardToFullShape`` custom
calls, which XLA warns are deprecated on every compile). Replica-mode
modules have no shardings: the option does not change them.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.pass_infra import NamedPipeline, Pipeline, option, run_pipeline
from pxla_mlir.mlir.pass_infra.options import choices, configure

__all__ = ["LEGALIZE_TO_MHLO", "HandoffPipeline", "PmapPipeline", "XmapPipeline", "ShardingDialect", "choices",
           "configure", "to_stablehlo"]

#: jaxlib's legalization of jax's StableHLO/CHLO output to MHLO.
LEGALIZE_TO_MHLO = "func.func(chlo-legalize-to-hlo),stablehlo-legalize-to-hlo"
#: The way back, for users who want StableHLO (``as_text("stablehlo")``).
EXPORT_TO_STABLEHLO = "builtin.module(hlo-legalize-to-stablehlo)"


def to_stablehlo(module: ir.Module) -> ir.Module:
    """A StableHLO copy of an MHLO module."""
    with module.context:
        copy = ir.Module.parse(ir_utils.asm_text(module.operation, debug_info=True))
    run_pipeline(copy, Pipeline.cached(EXPORT_TO_STABLEHLO), reproducer=False)
    return copy


ShardingDialect = Literal["gspmd", "sdy"]
_SHARDING_HELP = "how partition-mode modules state shardings: Shardy (sdy) or GSPMD (mhlo.sharding)"


def _sharding_steps(dialect: str, *, manual: bool) -> list[str]:
    """The passes that write a global @main's layout (and its manual region) in one dialect."""
    if dialect == "sdy":
        return ["pxla-add-sdy-mesh", *(["pxla-expand-manual-computation"] if manual else []),
                "pxla-annotate-sdy-shardings", "pxla-convert-op-shardings-to-sdy"]
    return [*(["pxla-expand-manual-sharding"] if manual else []), "pxla-annotate-shardings"]


def _finish(steps: list[str], dialect: str) -> str:
    # Collectives over groups of one device (a size-1 axis) are their
    # operands: XLA's TPU compiler drops such all-reduces from jax's (SPMD)
    # program but not from a replica-mode one, so drop them here, once every
    # collective has its final groups. A one-partition Shardy module keeps no
    # manual region (XLA compiles it without the partitioner that takes one
    # apart; jax emits none there). Folding after the rewrites keeps the
    # emitted MHLO small and stable; the verifier must see the final module,
    # and knows which dialect to expect.
    inline = ["pxla-inline-manual-computations"] if dialect == "sdy" else []
    steps = steps + ["pxla-elide-trivial-collectives", *inline, "canonicalize", "cse", "symbol-dce",
                     f"pxla-verify-handoff{{sharding-dialect={dialect}}}"]
    return ",".join(steps)


@dataclasses.dataclass(frozen=True)
class HandoffPipeline(NamedPipeline):
    """Per-device StableHLO/MHLO in, verified MHLO for XLA out."""

    argument = "pxla-handoff-pipeline"
    summary = "Legalize to MHLO, choose replica or partition mode, clean up, verify for XLA"

    mode: Literal["replica", "partition"] = option("replica", "run devices as replicas or as partitions")

    def elements(self) -> str:
        steps = [LEGALIZE_TO_MHLO]
        if self.mode == "replica":
            steps.append("pxla-convert-to-replica-mode")
        # Clean up after the rewrites; the verifier must see the final module.
        steps += ["canonicalize", "cse", "pxla-verify-handoff"]
        return ",".join(steps)


@dataclasses.dataclass(frozen=True)
class PmapPipeline(NamedPipeline):
    """pmap's imported pxla form in, XLA-ready MHLO out: what ``lower()`` runs."""

    argument = "pxla-pmap-pipeline"
    summary = "Legalize pmap's pxla form to MHLO, expand nested-pmap placeholders, make replica- or partition-mode MHLO"

    mode: Literal["replica", "partition"] = option("replica", "run devices as replicas (2022 pmap) or partitions")
    unshard: Literal["all-gather", "all-reduce"] = option("all-gather", "how nested pmap outputs are collected")
    sharding_dialect: ShardingDialect = option("sdy", _SHARDING_HELP, api_name="shardings")
    # Read by pmap's import, which runs pxla-place-pieces before this pipeline: not a step of it.
    pieces: Literal["on", "off"] = option("on", "nested pmaps' values enter and leave by piece where they can "
                                                "(off: 2022's layout, replicated over the inner devices)")

    def elements(self) -> str:
        # Import leaves jax's StableHLO/CHLO: legalize first. Values passed
        # unchanged from one pmap to the next need no collective.
        # Placeholders then expand into partition-mode code, so the mode
        # conversion below sees (and converts) their collectives too.
        steps = [LEGALIZE_TO_MHLO, "pxla-fold-shard-of-unshard", "pxla-expand-shard",
                 f"pxla-expand-unshard{{strategy={self.unshard}}}"]
        if self.mode == "replica":
            return _finish(steps + ["pxla-convert-to-replica-mode", "pxla-annotate-shardings"], "gspmd")
        steps += ["pxla-wrap-manual-main", *_sharding_steps(self.sharding_dialect, manual=True),
                  # a partitioned body's layouts inside (a no-op for other pmaps)
                  f"pxla-expand-sharding-constraints{{sharding-dialect={self.sharding_dialect}}}"]
        return _finish(steps, self.sharding_dialect)


@dataclasses.dataclass(frozen=True)
class XmapPipeline(NamedPipeline):
    """xmap's imported pxla form in, XLA-ready MHLO out: what ``lower()`` runs."""

    argument = "pxla-xmap-pipeline"
    summary = "Legalize xmap's pxla form to MHLO, make replica-mode, manual-SPMD or vectorized-SPMD MHLO"

    lowering: Literal["replica", "manual", "vectorize"] = option(
        "replica", "devices as replicas, one SPMD manual region, or the global view for XLA's partitioner")
    sharding_dialect: ShardingDialect = option("sdy", _SHARDING_HELP, api_name="shardings")

    def elements(self) -> str:
        # Import leaves jax's StableHLO/CHLO. Gradients of weights broadcast over
        # a named axis sum per-example products: contract them in one dot.
        steps = [LEGALIZE_TO_MHLO, "pxla-contract-batch-sums"]
        if self.lowering == "replica":
            return _finish(steps + ["pxla-convert-to-replica-mode", "pxla-annotate-shardings"], "gspmd")
        if self.lowering == "manual":
            steps.append("pxla-wrap-manual-main")
        steps += _sharding_steps(self.sharding_dialect, manual=self.lowering == "manual")
        if self.lowering == "vectorize":
            # the global view: its boundary shardings, and the layouts it constrains inside (nested xmaps)
            steps.append(f"pxla-expand-sharding-constraints{{sharding-dialect={self.sharding_dialect}}}")
        return _finish(steps, self.sharding_dialect)
