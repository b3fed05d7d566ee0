"""Named pipelines: lists of passes expanded in place by the pipeline parser.

A pipeline's ``elements()`` returns pipeline text; the comments say why the
order is what it is. ``pxla-opt --dump-pass-pipeline`` shows the expansion.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from .pass_infra import NamedPipeline, option

#: jaxlib's legalization of jax's StableHLO/CHLO output to MHLO.
LEGALIZE_TO_MHLO = "func.func(chlo-legalize-to-hlo),stablehlo-legalize-to-hlo"


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
    summary = "Expand nested-pmap placeholders, then make replica-mode or partition-mode MHLO for XLA"

    mode: Literal["replica", "partition"] = option("replica", "run devices as replicas (2022 pmap) or partitions")
    unshard: Literal["all-gather", "all-reduce"] = option("all-gather", "how nested pmap outputs are collected")

    def elements(self) -> str:
        # Values passed unchanged from one pmap to the next need no
        # collective. Placeholders then expand into partition-mode code, so
        # the mode conversion below sees (and converts) their collectives too.
        steps = ["pxla-fold-shard-of-unshard", "pxla-expand-shard", f"pxla-expand-unshard{{strategy={self.unshard}}}"]
        if self.mode == "replica":
            steps += ["pxla-convert-to-replica-mode", "pxla-annotate-shardings"]
        else:
            steps += ["pxla-wrap-manual-main", "pxla-expand-manual-sharding", "pxla-annotate-shardings"]
        # Folding after the rewrites keeps the emitted MHLO small and stable.
        steps += ["canonicalize", "cse", "symbol-dce", "pxla-verify-handoff"]
        return ",".join(steps)


@dataclasses.dataclass(frozen=True)
class XmapPipeline(NamedPipeline):
    """xmap's imported pxla form in, XLA-ready MHLO out: what ``lower()`` runs."""

    argument = "pxla-xmap-pipeline"
    summary = "Make replica-mode, manual-SPMD or vectorized-SPMD MHLO from an imported xmap"

    lowering: Literal["replica", "manual", "vectorize"] = option(
        "replica", "devices as replicas, one SPMD manual region, or the global view for XLA's partitioner")

    def elements(self) -> str:
        if self.lowering == "replica":
            steps = ["pxla-convert-to-replica-mode", "pxla-annotate-shardings"]
        elif self.lowering == "manual":
            steps = ["pxla-wrap-manual-main", "pxla-expand-manual-sharding", "pxla-annotate-shardings"]
        else:  # the global view only needs its boundary shardings
            steps = ["pxla-annotate-shardings"]
        return ",".join(steps + ["canonicalize", "cse", "symbol-dce", "pxla-verify-handoff"])
