# The top-level passes/ folder is installed as the package pxla_mlir.passes, a mapping pyright cannot follow:
# the pass classes the pipelines name are imported from there where a pipeline expands.
# pyright: reportMissingImports=false
"""Named pipelines: lists of passes expanded in place by the pipeline parser.

A pipeline's ``steps()`` lists its passes: pxla passes as instances (their
options typed and checked where the pipeline is written), jaxlib's as
pipeline text; the comments say why the order is what it is. Its text is
each step's canonical spelling, and ``pxla-opt --dump-pass-pipeline`` shows
the expansion.

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

The map pipelines also run a map's own passes (``extra_passes=``, see
:mod:`pxla_mlir.mlir.pass_infra.extra_passes`): ``pxla-passes`` right after
the pxla form is legalized to MHLO (``pxla-verify-form`` checks it again
after them), ``mhlo-passes`` on the final MHLO, before
``pxla-verify-handoff``. Their text is left out while they are empty.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Literal

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.pass_infra import NamedPipeline, Pipeline, option, run_pipeline
from pxla_mlir.mlir.pass_infra.base import Step
from pxla_mlir.mlir.pass_infra.extra_passes import (
    EXTRA_FIELDS,
    check_versions,
    extra_pass_options,
    own_pass_versions,
    unbraced,
)
from pxla_mlir.mlir.pass_infra.options import choices, configure as configure_choices, option_fields

__all__ = ["EXTRA_PASSES", "LEGALIZE_TO_MHLO", "HandoffPipeline", "PmapPipeline", "XmapPipeline", "ShardingDialect",
           "api_options", "choices", "configure", "to_stablehlo"]

#: jaxlib's legalization of jax's StableHLO/CHLO output to MHLO.
LEGALIZE_TO_MHLO = "func.func(chlo-legalize-to-hlo),stablehlo-legalize-to-hlo"
#: jaxlib's clean-up after the rewrites.
CLEAN_UP = ("canonicalize", "cse")
#: The way back, for users who want StableHLO (``as_text("stablehlo")``).
EXPORT_TO_STABLEHLO = "builtin.module(hlo-legalize-to-stablehlo)"


def to_stablehlo(module: ir.Module) -> ir.Module:
    """A StableHLO copy of an MHLO module."""
    with module.context:
        copy = ir.Module.parse(ir_utils.asm_text(module.operation, debug_info=True))
    run_pipeline(copy, Pipeline.cached(EXPORT_TO_STABLEHLO), reproducer=False)
    return copy


#: The API keyword (and command-line flag) of a map's own passes; every map pipeline takes it.
EXTRA_PASSES = "extra_passes"


def configure(cls, **values):
    """``cls(**values)`` as :func:`pxla_mlir.mlir.pass_infra.options.configure` makes it (each choice
    checked; an instance keeps its other options), where a map pipeline also takes ``extra_passes``
    (checked and made canonical: :func:`~pxla_mlir.mlir.pass_infra.extra_passes.extra_pass_options`)
    and the fields that hold them (as a map pipeline's text has them)."""
    own = {k: values.pop(k) for k in EXTRA_FIELDS if k in values}
    if EXTRA_PASSES in values:
        text = values.pop(EXTRA_PASSES)
        own = {**dict.fromkeys(("pxla_passes", "mhlo_passes"), ""), **extra_pass_options(text, EXTRA_PASSES)}
    options = configure_choices(cls, **values)
    return dataclasses.replace(options, **own) if own else options


def api_options(cls) -> dict[str, tuple[str, tuple[str, ...] | None]]:
    """A pipeline's options as the maps' API and the command line name them: name -> (help, its
    choices; None for pipeline text). A map pipeline's own passes are one option, ``extra_passes``."""
    out: dict[str, tuple[str, tuple[str, ...] | None]] = {}
    for info in option_fields(cls):
        if info.field not in EXTRA_FIELDS:
            name = info.api_name or info.field
            out[name] = (info.help, choices(cls, name))
    if issubclass(cls, _OwnPasses):
        out[EXTRA_PASSES] = ("passes of your own, as pipeline text (-p's), run on the final MHLO before "
                             "pxla-verify-handoff", None)
    return out


ShardingDialect = Literal["gspmd", "sdy"]
_SHARDING_HELP = "how partition-mode modules state shardings: Shardy (sdy) or GSPMD (mhlo.sharding)"


# The passes are imported where a pipeline expands, not here: listing
# pipelines and configuring a map stay as fast as the registry keeps them.
def _verify_form() -> Step:
    from pxla_mlir.passes.verify_form import VerifyFormPass

    return VerifyFormPass()


def _replica_steps() -> list[Step]:
    from pxla_mlir.passes.annotate_shardings import AnnotateShardingsPass
    from pxla_mlir.passes.convert_to_replica_mode import ConvertToReplicaModePass

    return [ConvertToReplicaModePass(), AnnotateShardingsPass()]


def _sharding_steps(dialect: ShardingDialect, *, manual: bool) -> list[Step]:
    """The passes that write a global @main's layout (and its manual region) in one dialect."""
    if dialect == "sdy":
        from pxla_mlir.passes.add_sdy_mesh import AddSdyMeshPass
        from pxla_mlir.passes.annotate_sdy_shardings import AnnotateSdyShardingsPass
        from pxla_mlir.passes.convert_op_shardings_to_sdy import ConvertOpShardingsToSdyPass
        from pxla_mlir.passes.expand_manual_computation import ExpandManualComputationPass

        return [AddSdyMeshPass(), *([ExpandManualComputationPass()] if manual else []), AnnotateSdyShardingsPass(),
                ConvertOpShardingsToSdyPass()]
    from pxla_mlir.passes.annotate_shardings import AnnotateShardingsPass
    from pxla_mlir.passes.expand_manual_sharding import ExpandManualShardingPass

    return [*([ExpandManualShardingPass()] if manual else []), AnnotateShardingsPass()]


def _constraints_step(dialect: ShardingDialect) -> Step:
    from pxla_mlir.passes.expand_sharding_constraints import ExpandShardingConstraintsPass

    return ExpandShardingConstraintsPass(sharding_dialect=dialect)


def _wrap_manual_main() -> Step:
    from pxla_mlir.passes.wrap_manual_main import WrapManualMainPass

    return WrapManualMainPass()


def _finish(steps: list[Step], dialect: ShardingDialect, own: str = "") -> list[Step]:
    from pxla_mlir.passes.elide_trivial_collectives import ElideTrivialCollectivesPass
    from pxla_mlir.passes.inline_manual_computations import InlineManualComputationsPass
    from pxla_mlir.passes.verify_handoff import VerifyHandoffPass

    # Collectives over groups of one device (a size-1 axis) are their
    # operands: XLA's TPU compiler drops such all-reduces from jax's (SPMD)
    # program but not from a replica-mode one, so drop them here, once every
    # collective has its final groups. A one-partition Shardy module keeps no
    # manual region (XLA compiles it without the partitioner that takes one
    # apart; jax emits none there). Folding after the rewrites keeps the
    # emitted MHLO small and stable; the verifier must see the final module,
    # and knows which dialect to expect.
    inline = [InlineManualComputationsPass()] if dialect == "sdy" else []
    # A map's own MHLO passes (``own``) see that final module, and the verifier sees what they leave.
    return [*steps, ElideTrivialCollectivesPass(), *inline, *CLEAN_UP, "symbol-dce", *([own] if own else []),
            VerifyHandoffPass(sharding_dialect=dialect)]


class _OwnPasses:
    """The options of a map pipeline that hold the map's own passes (``extra_passes=``), as element text
    (resolved where the pipeline expands, as registered then), and, in a recorded pipeline's text only
    (:meth:`recorded`), the ``pass@version`` each of them had when it ran."""

    argument: ClassVar[str]
    pxla_passes: str
    mhlo_passes: str
    pass_versions: tuple[str, ...]

    def __post_init__(self):
        for name in ("pxla_passes", "mhlo_passes"):  # as parsed from text, the value keeps its quoting braces
            object.__setattr__(self, name, unbraced(getattr(self, name)))
        object.__setattr__(self, "pass_versions", tuple(self.pass_versions))
        check_versions(self.argument, self.pass_versions)

    def _own_pxla_steps(self) -> list[Step]:
        # the pxla passes, then the form checked again: the passes after them read it
        return [self.pxla_passes, _verify_form()] if self.pxla_passes else []

    def versions(self) -> tuple[str, ...]:
        return own_pass_versions(self)

    def recorded(self) -> str:
        """This pipeline as a lowering records it (``Lowered.pipeline``, reproducers): anchored, with the
        version of each of its own passes as registered now, so that a replay with another version is
        refused."""
        named: Any = self
        versions = own_pass_versions(named)
        return (dataclasses.replace(named, pass_versions=versions) if versions else named).anchored()

    def spec(self) -> str:
        items = []
        for info in option_fields(type(self)):
            value = getattr(self, info.field)
            if info.field not in EXTRA_FIELDS:
                items.append(f"{info.name}={value}")
            elif value:
                items.append(f"{info.name}={{{value}}}" if isinstance(value, str) else f"{info.name}={','.join(value)}")
        return f"{self.argument}{{{' '.join(items)}}}"


_PXLA_PASSES_HELP = ("passes run on the pxla form once legalized to MHLO, before the placeholders expand "
                     "(a map's extra_passes={'pxla': ...})")
_MHLO_PASSES_HELP = "passes run on the final MHLO, before pxla-verify-handoff (a map's extra_passes=)"
_VERSIONS_HELP = "the version each pxla pass of pxla-passes and mhlo-passes declares, as pass@version"


@dataclasses.dataclass(frozen=True)
class HandoffPipeline(NamedPipeline):
    """Per-device StableHLO/MHLO in, verified MHLO for XLA out."""

    argument = "pxla-handoff-pipeline"
    summary = "Legalize to MHLO, choose replica or partition mode, clean up, verify for XLA"

    mode: Literal["replica", "partition"] = option("replica", "run devices as replicas or as partitions")

    def steps(self) -> list[Step]:
        from pxla_mlir.passes.convert_to_replica_mode import ConvertToReplicaModePass
        from pxla_mlir.passes.verify_handoff import VerifyHandoffPass

        steps: list[Step] = [LEGALIZE_TO_MHLO]
        if self.mode == "replica":
            steps.append(ConvertToReplicaModePass())
        # Clean up after the rewrites; the verifier must see the final module.
        return [*steps, *CLEAN_UP, VerifyHandoffPass()]


@dataclasses.dataclass(frozen=True)
class PmapPipeline(_OwnPasses, NamedPipeline):
    """pmap's imported pxla form in, XLA-ready MHLO out: what ``lower()`` runs."""

    argument = "pxla-pmap-pipeline"
    summary = "Legalize pmap's pxla form to MHLO, expand nested-pmap placeholders, make replica- or partition-mode MHLO"

    mode: Literal["replica", "partition"] = option("replica", "run devices as replicas (2022 pmap) or partitions")
    unshard: Literal["all-gather", "all-reduce"] = option("all-gather", "how nested pmap outputs are collected")
    sharding_dialect: ShardingDialect = option("sdy", _SHARDING_HELP, api_name="shardings")
    pxla_passes: str = option("", _PXLA_PASSES_HELP)
    mhlo_passes: str = option("", _MHLO_PASSES_HELP)
    pass_versions: tuple[str, ...] = option((), _VERSIONS_HELP)

    def steps(self) -> list[Step]:
        # Check the form before any pass reads it. Import leaves jax's
        # StableHLO/CHLO: legalize first. Values passed unchanged from one
        # pmap to the next need no collective. Placeholders then expand into
        # partition-mode code, so the mode conversion below sees (and
        # converts) their collectives too.
        from pxla_mlir.passes.expand_shard import ExpandShardPass
        from pxla_mlir.passes.expand_unshard import ExpandUnshardPass
        from pxla_mlir.passes.fold_shard_of_unshard import FoldShardOfUnshardPass

        steps: list[Step] = [_verify_form(), LEGALIZE_TO_MHLO, *self._own_pxla_steps(), FoldShardOfUnshardPass(),
                             ExpandShardPass(), ExpandUnshardPass(strategy=self.unshard)]
        if self.mode == "replica":
            return _finish(steps + _replica_steps(), "gspmd", self.mhlo_passes)
        steps += [_wrap_manual_main(), *_sharding_steps(self.sharding_dialect, manual=True),
                  # a partitioned body's layouts inside (a no-op for other pmaps)
                  _constraints_step(self.sharding_dialect)]
        return _finish(steps, self.sharding_dialect, self.mhlo_passes)


@dataclasses.dataclass(frozen=True)
class XmapPipeline(_OwnPasses, NamedPipeline):
    """xmap's imported pxla form in, XLA-ready MHLO out: what ``lower()`` runs."""

    argument = "pxla-xmap-pipeline"
    summary = "Legalize xmap's pxla form to MHLO, make replica-mode, manual-SPMD or vectorized-SPMD MHLO"

    lowering: Literal["replica", "manual", "vectorize"] = option(
        "replica", "devices as replicas, one SPMD manual region, or the global view for XLA's partitioner")
    sharding_dialect: ShardingDialect = option("sdy", _SHARDING_HELP, api_name="shardings")
    pxla_passes: str = option("", _PXLA_PASSES_HELP)
    mhlo_passes: str = option("", _MHLO_PASSES_HELP)
    pass_versions: tuple[str, ...] = option((), _VERSIONS_HELP)

    def steps(self) -> list[Step]:
        # Check the form before any pass reads it. Import leaves jax's
        # StableHLO/CHLO. Gradients of weights broadcast over a named axis
        # sum per-example products: contract them in one dot.
        from pxla_mlir.passes.contract_batch_sums import ContractBatchSumsPass

        steps: list[Step] = [_verify_form(), LEGALIZE_TO_MHLO, *self._own_pxla_steps(), ContractBatchSumsPass()]
        if self.lowering == "replica":
            return _finish(steps + _replica_steps(), "gspmd", self.mhlo_passes)
        if self.lowering == "manual":
            steps.append(_wrap_manual_main())
        steps += _sharding_steps(self.sharding_dialect, manual=self.lowering == "manual")
        if self.lowering == "vectorize":
            # the global view: its boundary shardings, and the layouts it constrains inside (nested xmaps)
            steps.append(_constraints_step(self.sharding_dialect))
        return _finish(steps, self.sharding_dialect, self.mhlo_passes)
