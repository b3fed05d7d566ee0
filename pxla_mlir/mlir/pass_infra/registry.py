"""Every pass and named pipeline by argument: :data:`REGISTRY`, the one owner.

The built-in tables (:data:`PASSES`, :data:`PIPELINES`; keep them
alphabetical) hold "module:Class" strings imported on first use, so listing
passes stays fast; ``tests/mlir/pass_infra/test_registry.py`` checks that
every entry imports, has a matching ``argument``, a docstring and a lit test.

Passes from outside the package (plugin files and modules, entry points,
``register_pass``: :mod:`.plugins` imports and checks them) are added to the
same object, with where each came from. A change is all or nothing
(:meth:`PassRegistry.changing`), and every change bumps
:attr:`PassRegistry.generation`: whatever was resolved from the registry
(a parsed pipeline, a map's pass versions) is resolved again once it moved.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import threading
from collections.abc import Generator, Iterable
from typing import Any

__all__ = ["PASSES", "PIPELINES", "REGISTRY", "BrokenPlugin", "PassRegistry"]

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


@dataclasses.dataclass(frozen=True)
class BrokenPlugin:
    """An installed entry point that did not load: what it is and why (one line)."""

    label: str
    error: str


@dataclasses.dataclass
class _State:
    """What a run-time change touches, copied whole before it (tables of a few entries)."""

    classes: dict[str, type] = dataclasses.field(default_factory=dict[str, type])  # argument -> pass class
    sources: dict[str, str] = dataclasses.field(default_factory=dict[str, str])  # argument -> where it came from
    reloadable: dict[str, str] = dataclasses.field(default_factory=dict[str, str])  # argument -> plugin spec to load it again
    # a loaded plugin (a file's real path, a module's name) -> (the file's state when loaded, its passes)
    plugins: dict[str, tuple[str, tuple[type, ...]]] = dataclasses.field(
        default_factory=dict[str, tuple[str, tuple[type, ...]]])

    def copy(self) -> _State:
        return _State(dict(self.classes), dict(self.sources), dict(self.reloadable), dict(self.plugins))


class PassRegistry:
    """The built-in passes and pipelines, the passes registered at run time
    with their sources, and the plugins loaded."""

    def __init__(self, passes: dict[str, str], pipelines: dict[str, str]):
        self.passes = passes
        self.pipelines = pipelines
        self._state = _State()
        self._lock = threading.RLock()
        #: Counts changes: what was resolved from the registry at an older generation is resolved again.
        self.generation = 0
        self.entry_points_read = False
        #: Installed entry points that did not load: reported where a name is unknown, never for every name.
        self.broken: list[BrokenPlugin] = []

    # -- reading ---------------------------------------------------------------------------------
    def load(self, argument: str) -> Any:
        """The pass or pipeline class registered as ``argument``, or None (the installed plugins' passes
        are known once :func:`~pxla_mlir.mlir.pass_infra.plugins.resolve` has read them)."""
        return self._state.classes.get(argument) or _load_builtin(argument)

    def registered(self) -> dict[str, type]:
        """The passes registered at run time, by argument (a copy)."""
        return dict(self._state.classes)

    def is_registered(self, argument: str) -> bool:
        return argument in self._state.classes

    def is_builtin(self, argument: str) -> bool:
        return argument in self.passes or argument in self.pipelines

    def is_pxla_name(self, name: str) -> bool:
        return self.is_builtin(name) or self.is_registered(name)

    def names(self) -> list[str]:
        """Every pxla pass and pipeline argument: run-time ones first (they are what a user is most likely
        to misspell), then the built-in tables."""
        return [*self._state.classes, *self.passes, *self.pipelines]

    def source(self, argument: str) -> str | None:
        """Where a pass registered at run time came from (a plugin file, module or entry point)."""
        return self._state.sources.get(argument)

    def origin(self, argument: str) -> str:
        """``" (plugin SOURCE)"`` for a registered pass, ``""`` for a built-in one: error messages name the plugin."""
        source = self._state.sources.get(argument)
        return f" (plugin {source})" if source else ""

    def plugin_specs(self) -> tuple[str, ...]:
        """The plugins loaded so far, as given (files as absolute paths)."""
        return tuple(self._state.plugins)

    def plugin(self, key: str, state: str = "") -> tuple[type, ...] | None:
        """The passes the plugin ``key`` registered when it was loaded in ``state``, or None."""
        loaded = self._state.plugins.get(key)
        return loaded[1] if loaded is not None and loaded[0] == state else None

    def specs_for(self, arguments: Iterable[str]) -> tuple[str, ...]:
        """The plugins to load for these pass arguments to be known again (a reproducer records them)."""
        table = self._state.reloadable
        return tuple(dict.fromkeys(table[a] for a in arguments if a in table))

    # -- changing --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def changing(self) -> Generator[None]:
        """One change, all or nothing: if the block raises, the registry is as it was before it."""
        with self._lock:
            saved = self._state.copy()
            try:
                yield
            except BaseException:
                self._state = saved
                raise
            finally:
                self.generation += 1

    def add(self, cls: type, source: str, reloadable: str | None = None) -> type:
        """Registers a checked pass class under its ``argument`` (replacing one of the same name)."""
        argument = str(getattr(cls, "argument"))  # noqa: B009 (a ModulePass subclass; type says no more)
        with self.changing():
            self._state.classes[argument] = cls
            self._state.sources[argument] = source
            if reloadable is not None:
                self._state.reloadable[argument] = reloadable
        return cls

    def remember_plugin(self, key: str, state: str, classes: Iterable[type]) -> None:
        with self.changing():
            self._state.plugins[key] = (state, tuple(classes))

    def forget(self) -> None:
        """Forgets every pass registered at run time and every plugin loaded, as a new process starts."""
        with self.changing():
            self._state = _State()

    @contextlib.contextmanager
    def restored_after(self) -> Generator[None]:
        """Everything registered inside the block is forgotten after it (tests, benchmarks)."""
        with self._lock:
            saved, read, broken = self._state.copy(), self.entry_points_read, list(self.broken)
        try:
            yield
        finally:
            with self._lock:
                self._state, self.entry_points_read, self.broken = saved, read, broken
                self.generation += 1

    # -- installed entry points (read by .plugins) -------------------------------------------------
    def reading_entry_points(self) -> bool:
        """Claims the one reading of the installed entry points: True for the first caller only."""
        with self._lock:
            if self.entry_points_read:
                return False
            self.entry_points_read = True
            return True

    def broken_note(self) -> str:
        """A note on installed plugins that did not load, for a message about an unknown name; "" if none."""
        if not self.broken:
            return ""
        listed = "; ".join(f"{b.label}: {b.error}" for b in self.broken)
        return f" (note: installed pass plugins that did not load, which may define it: {listed})"


@functools.cache
def _load_builtin(argument: str) -> Any:
    target = PASSES.get(argument) or PIPELINES.get(argument)
    if target is None:
        return None
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


#: The registry of this process.
REGISTRY = PassRegistry(PASSES, PIPELINES)
