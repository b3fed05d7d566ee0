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
