"""Named pipelines: lists of passes expanded in place by the pipeline parser.

A pipeline's ``elements()`` returns pipeline text; the comments say why the
order is what it is. ``pxla-opt --dump-pass-pipeline`` shows the expansion.

The pipelines' typed options are the single declaration of pmap's ``mode``
and ``unshard`` and xmap's ``lowering``: the Python API validates against
them (:func:`configure`), the command line takes its choices from them, and
an instance is the options value itself (``PmapPipeline(mode="partition")``).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from .pass_infra import NamedPipeline, option
from .pass_infra.options import choices, configure

__all__ = ["LEGALIZE_TO_MHLO", "HandoffPipeline", "PmapPipeline", "XmapPipeline", "choices", "configure"]

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
    summary = "Legalize pmap's pxla form to MHLO, expand nested-pmap placeholders, make replica- or partition-mode MHLO"

    mode: Literal["replica", "partition"] = option("replica", "run devices as replicas (2022 pmap) or partitions")
    unshard: Literal["all-gather", "all-reduce"] = option("all-gather", "how nested pmap outputs are collected")

    def elements(self) -> str:
        # Import leaves jax's StableHLO/CHLO: legalize first. Values passed
        # unchanged from one pmap to the next need no collective.
        # Placeholders then expand into partition-mode code, so the mode
        # conversion below sees (and converts) their collectives too.
        steps = [LEGALIZE_TO_MHLO, "pxla-fold-shard-of-unshard", "pxla-expand-shard", f"pxla-expand-unshard{{strategy={self.unshard}}}"]
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
    summary = "Legalize xmap's pxla form to MHLO, make replica-mode, manual-SPMD or vectorized-SPMD MHLO"

    lowering: Literal["replica", "manual", "vectorize"] = option(
        "replica", "devices as replicas, one SPMD manual region, or the global view for XLA's partitioner")

    def elements(self) -> str:
        steps = [LEGALIZE_TO_MHLO]  # import leaves jax's StableHLO/CHLO
        if self.lowering == "replica":
            steps += ["pxla-convert-to-replica-mode", "pxla-annotate-shardings"]
        elif self.lowering == "manual":
            steps += ["pxla-wrap-manual-main", "pxla-expand-manual-sharding", "pxla-annotate-shardings"]
        else:  # the global view only needs its boundary shardings
            steps += ["pxla-annotate-shardings"]
        return ",".join(steps + ["canonicalize", "cse", "symbol-dce", "pxla-verify-handoff"])
