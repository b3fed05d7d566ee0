"""Every pxla pass and named pipeline, by argument.

Keep both tables alphabetical. Entries are "module:Class" strings imported on
first use, so listing passes stays fast; ``tests/mlir/pass_infra/test_registry.py`` checks
that every entry imports, has a matching ``argument``, a docstring and a lit
test.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

PASSES: dict[str, str] = {
    "pxla-add-device-axis": "pxla_mlir.passes.add_device_axis:AddDeviceAxisPass",
    "pxla-add-sdy-mesh": "pxla_mlir.passes.add_sdy_mesh:AddSdyMeshPass",
    "pxla-annotate-sdy-shardings": "pxla_mlir.passes.annotate_sdy_shardings:AnnotateSdyShardingsPass",
    "pxla-annotate-shardings": "pxla_mlir.passes.annotate_shardings:AnnotateShardingsPass",
    "pxla-contract-batch-sums": "pxla_mlir.passes.contract_batch_sums:ContractBatchSumsPass",
    "pxla-convert-op-shardings-to-sdy": "pxla_mlir.passes.convert_op_shardings_to_sdy:ConvertOpShardingsToSdyPass",
    "pxla-convert-to-replica-mode": "pxla_mlir.passes.convert_to_replica_mode:ConvertToReplicaModePass",
    "pxla-elide-trivial-collectives": "pxla_mlir.passes.elide_trivial_collectives:ElideTrivialCollectivesPass",
    "pxla-expand-manual-computation": "pxla_mlir.passes.expand_manual_computation:ExpandManualComputationPass",
    "pxla-expand-manual-sharding": "pxla_mlir.passes.expand_manual_sharding:ExpandManualShardingPass",
    "pxla-expand-shard": "pxla_mlir.passes.expand_shard:ExpandShardPass",
    "pxla-expand-sharding-constraints": "pxla_mlir.passes.expand_sharding_constraints:ExpandShardingConstraintsPass",
    "pxla-expand-unshard": "pxla_mlir.passes.expand_unshard:ExpandUnshardPass",
    "pxla-fold-shard-of-unshard": "pxla_mlir.passes.fold_shard_of_unshard:FoldShardOfUnshardPass",
    "pxla-inline-manual-computations": "pxla_mlir.passes.inline_manual_computations:InlineManualComputationsPass",
    "pxla-place-pieces": "pxla_mlir.passes.place_pieces:PlacePiecesPass",
    "pxla-place-tiles": "pxla_mlir.passes.place_tiles:PlaceTilesPass",
    "pxla-verify-form": "pxla_mlir.passes.verify_form:VerifyFormPass",
    "pxla-verify-handoff": "pxla_mlir.passes.verify_handoff:VerifyHandoffPass",
    "pxla-wrap-manual-main": "pxla_mlir.passes.wrap_manual_main:WrapManualMainPass",
}

PIPELINES: dict[str, str] = {
    "pxla-handoff-pipeline": "pxla_mlir.mlir.pipelines:HandoffPipeline",
    "pxla-pmap-pipeline": "pxla_mlir.mlir.pipelines:PmapPipeline",
    "pxla-xmap-pipeline": "pxla_mlir.mlir.pipelines:XmapPipeline",
}


#: Passes registered at run time (plugins), by argument; consulted before the built-in tables.
REGISTERED: dict[str, type] = {}
#: Where each registered pass came from (a plugin file, module or entry point), by argument.
SOURCES: dict[str, str] = {}


def register(cls: type, source: str | None = None) -> type:
    """Adds a pass class (a ``ModulePass`` subclass) under its ``argument``
    (:func:`pxla_mlir.mlir.pass_infra.plugins.register_pass` checks it first)."""
    argument = str(getattr(cls, "argument"))  # noqa: B009 (a ModulePass subclass; type says no more)
    REGISTERED[argument] = cls
    SOURCES[argument] = source or cls.__module__
    return cls


#: Called with a name no table knows, before load() gives up; True if it registered passes meanwhile
#: (:mod:`.plugins` sets it: it reads the installed packages' entry points then).
unknown_name_hook: Callable[[str], bool] | None = None


def load(argument: str):
    """The pass or pipeline class for an argument, or None if it is unknown."""
    found = REGISTERED.get(argument) or _load_builtin(argument)
    if found is None and unknown_name_hook is not None and unknown_name_hook(argument):
        found = REGISTERED.get(argument)
    return found


def origin(argument: str) -> str:
    """``" (plugin SOURCE)"`` for a registered pass, ``""`` for a built-in one: error messages name the plugin."""
    source = SOURCES.get(argument)
    return f" (plugin {source})" if source and argument in REGISTERED else ""


@functools.cache
def _load_builtin(argument: str):
    target = PASSES.get(argument) or PIPELINES.get(argument)
    if target is None:
        return None
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def is_pxla_name(name: str) -> bool:
    return name in PASSES or name in PIPELINES or name in REGISTERED
