"""Base classes for pxla passes and named pipelines, and the safe bridge into
jaxlib's ``PassManager.add(callable)``.

A pass is a frozen dataclass whose fields are its options (see
:mod:`.options`). ``run(module)`` rewrites the ``builtin.module`` operation in
place. Problems are reported with ``raise PassError(op, msg)`` (stop now) or
``self.error(op, msg)`` (keep looking, fail at the end); ``self.warn`` and
``self.remark`` never fail the pass.

The bridge turns every exception escaping ``run`` (``sys.exit`` included;
Ctrl-C goes on) into an MLIR error at the op's location plus
``signal_pass_failure()``: no Python exception ever crosses into C++, and a
buggy pass reports "internal error" instead of a traceback. With
``verify=True`` it also runs MLIR's verifier after a pass that may change
the module (every pass whose ``checks_only`` is False), so that no later
pass, a C++ one included, sees IR a Python pass made invalid. A plugin's pass
is held to more (:mod:`.plugin_checks`): verified always, its promises
checked, what it kept of the module made safe; every error names it and its
plugin.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import traceback
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import diagnostics
from pxla_mlir.mlir.core.diagnostics import PassError
from pxla_mlir.mlir.pass_infra import plugin_checks, statistics
from pxla_mlir.mlir.pass_infra.census import Census
from pxla_mlir.mlir.pass_infra.options import format_options, option_fields, parse_options
from pxla_mlir.mlir.pass_infra.registry import REGISTRY

__all__ = ["ModulePass", "NamedPipeline", "PassError", "Step"]

Where = Any  # ir.Operation | ir.OpView | ir.Value | ir.Location | None


def location(where: Where, fallback: ir.Location | None = None) -> ir.Location:
    if isinstance(where, ir.Location):
        return where
    if isinstance(where, ir.Value):
        return where.location
    if where is not None:
        return where.location  # Operation or OpView
    if fallback is None:
        raise ValueError("no location to report at")
    return fallback


class _Configurable:
    """Shared by passes and pipelines: an argument, a summary, typed options."""

    argument: ClassVar[str]
    summary: ClassVar[str]

    @classmethod
    def from_options(cls, text: str = ""):
        return cls(**parse_options(cls, text, cls.argument))

    @classmethod
    def options(cls):
        return option_fields(cls)

    def spec(self) -> str:
        """Canonical text: the argument with every option, as a pipeline element."""
        return self.argument + format_options(self)

    def __str__(self) -> str:
        return self.spec()


class _RunState(threading.local):
    def __init__(self):
        self.stack: list[dict] = []


_run_state = _RunState()


@dataclasses.dataclass(frozen=True)
class ModulePass(_Configurable):
    """A pass over the ``builtin.module`` op, as a frozen dataclass. Subclasses
    set ``argument`` (its name in pipelines and on the command line) and
    ``summary`` (one line), declare options as fields with
    [`option`][pxla_mlir.passes.option] and implement ``run``; a pass that
    never changes the module sets ``checks_only = True`` (nothing to verify
    after it), and ``version`` changes whenever what the pass does changes
    (it is part of every cache key of a pipeline that runs the pass).
    [Writing a pass](writing-a-pass.md) shows a whole one."""

    checks_only: ClassVar[bool] = False
    #: The op names the pass acts on, when it acts on nothing else (not the module's attributes, not its
    #: functions): a module holding none of them is left as it is, without running the pass (the
    #: pipeline's :class:`~.census.Census` says so without a walk). Empty: the pass always runs.
    acts_on: ClassVar[frozenset[str]] = frozenset()
    #: Changes whenever what the pass does changes: part of every cache key a pipeline holding it makes.
    version: ClassVar[str] = "1"

    @classmethod
    def statistics(cls) -> list[statistics.Statistic]:
        """The counters the pass declares (``name = Statistic("ops-rewritten", "what it counts")``; count
        with ``self.name.add()`` in ``run``), as ``--mlir-pass-statistics`` reports them."""
        return statistics.declared(cls)

    def run(self, module: ir.Operation) -> None:
        """Rewrites ``module`` (the ``builtin.module`` operation) in place. ``raise
        PassError(op, message)`` stops the pass with an error at ``op``; any other
        exception is reported as an internal error of the pass, never a crash."""
        raise NotImplementedError

    # -- diagnostics inside run() ------------------------------------------
    def error(self, where: Where, message: str, notes: Iterable[tuple[Where, str]] = ()) -> None:
        """Reports an error at ``where`` (with ``(where, message)`` notes) and fails the pass once ``run``
        returns; the pass goes on, to report every problem in one run."""
        state = _run_state.stack[-1]
        _emit("error", location(where, state["root"].location), message, notes, state["root"])
        state["failed"] = True

    def warn(self, where: Where, message: str) -> None:
        """Reports a warning at ``where`` (an op, value or location); the pass goes on."""
        diagnostics.emit("warning", location(where, _run_state.stack[-1]["root"].location), message)

    def remark(self, where: Where, message: str) -> None:
        """Reports a remark at ``where`` (a note for the reader, as MLIR's remarks); the pass goes on."""
        diagnostics.emit("remark", location(where, _run_state.stack[-1]["root"].location), message)

    # -- the bridge into jaxlib's PassManager --------------------------------
    def add_to(self, pm, *, verify: bool = False, keep_main: bool = False, census: Census | None = None,
               after_jaxlib: bool = True) -> None:
        """Adds this pass to a jaxlib PassManager; ``verify``: verify the
        module after it unless it only checks (for a PassManager whose own
        verifier is off); ``keep_main``: a map's pipeline, whose @main must
        keep the signature the map launches (checked after a plugin's pass);
        ``census``: the one the run's passes share, and ``after_jaxlib``
        whether jaxlib passes (or the start of the run) come right before
        this pass, so that what the census knew is stale."""
        callback = self._callback(verify=verify and not self.checks_only, keep_main=keep_main,
                                  census=census, after_jaxlib=after_jaxlib)
        pm.add(callback, name=type(self).__name__, argument=self.argument, description=self.summary)

    def _callback(self, *, verify: bool = False, keep_main: bool = False, census: Census | None = None,
                  after_jaxlib: bool = True):
        origin = REGISTRY.origin(self.argument)  # a plugin's pass: its errors name the plugin; it is watched
        me = f"{self.argument}{origin}"
        acts_on = self.acts_on if census is not None else frozenset()

        def callback(op, pass_handle):
            if census is not None:
                if after_jaxlib:
                    census.forget()
                if acts_on and not census.holds_any(op, acts_on):
                    return  # nothing to act on: the module stays as it is, and so does the census
                if not self.checks_only:
                    census.forget()
            state = {"root": op, "failed": False}
            _run_state.stack.append(state)
            watch = plugin_checks.Watch.before(op, checks_only=self.checks_only, keep_main=keep_main) \
                if origin else None
            references = plugin_checks.context_references(op) if origin else 0
            verifying = False
            try:
                # A default location and context for types/attributes built in run().
                with op.context, op.location, statistics.counting(self):
                    self.run(op)
                if (verify or watch is not None) and not state["failed"]:  # a plugin's pass, whatever it says
                    verifying = True
                    op.verify()
                    verifying = False
                broken = watch.broken(op) if watch is not None and not state["failed"] else ""
                if broken:
                    _emit("error", op.location, f"{me} {broken}", (), op)
                    state["failed"] = True
            except ir.MLIRError as e:  # the verifier's errors (already routed to a collector, if one is active)
                for d in e.error_diagnostics:
                    diagnostics.emit("error", d.location, d.message, [(n.location, n.message) for n in d.notes])
                # say whose IR it is: the verifier's own errors name no pass
                said = "left invalid IR (the verifier's errors say where): fix the pass" if verifying else \
                    "failed in MLIR (the errors above say where)"
                _emit("error", op.location, f"{me} {said}", (), op)
                state["failed"] = True
            except PassError as e:
                _emit("error", location(e.where, op.location), e.message, e.notes, op)
                state["failed"] = True
            except KeyboardInterrupt:  # Ctrl-C: the pipeline stops, and the interrupt goes on
                raise
            except SystemExit as e:  # a pass ends the run, not the process: say which
                _emit("error", op.location, f"{me} called sys.exit({_shown(e.code)}): a pass reports a problem "
                      f"with `raise PassError(op, message)` or self.error(op, message) instead", (), op)
                state["failed"] = True
            except BaseException as e:  # a bug in the pass: report it, never abort
                if os.environ.get("PXLA_DEBUG"):
                    traceback.print_exc()
                hint = "" if os.environ.get("PXLA_DEBUG") else " (set PXLA_DEBUG=1 for the traceback)"
                _emit("error", op.location, f"internal error in {me}: {describe_exception(e)}{hint}", (), op)
                state["failed"] = True
            finally:
                _run_state.stack.pop()
                if origin:
                    plugin_checks.release(op, references)
            if state["failed"]:
                pass_handle.signal_pass_failure()

        return callback


def describe_exception(e: BaseException) -> str:
    """``Type: message`` of any exception, even one whose ``str()`` raises."""
    return f"{type(e).__name__}: {_shown(e)}"


def _shown(value: object) -> str:
    try:
        return str(value)
    except Exception:  # a value whose __str__ fails is still said
        try:
            return f"<{type(value).__name__} that cannot be printed>"
        except Exception:
            return "<a value that cannot be printed>"


def _emit(severity, loc, message, notes, root) -> None:
    notes = [(location(w, root.location), m) for w, m in notes]
    diagnostics.emit(severity, loc, message, notes)


#: A step of a named pipeline: a pxla pass instance, or jaxlib passes as pipeline text.
Step = ModulePass | str


@dataclasses.dataclass(frozen=True)
class NamedPipeline(_Configurable):
    """A named list of passes, expanded in place wherever its argument appears
    in a pipeline. Subclasses implement :meth:`steps`."""

    def steps(self) -> Sequence[Step]:
        """The passes, in order, for this instance's options."""
        raise NotImplementedError

    def elements(self) -> str:
        """The pipeline elements as text, e.g. ``"pxla-a{k=v},canonicalize"``:
        each step's canonical spelling (a pass with all its options)."""
        return ",".join(str(step) for step in self.steps())

    def anchored(self) -> str:
        """This pipeline as a whole pass pipeline: ``builtin.module(<spec>)``."""
        return f"builtin.module({self.spec()})"

    def recorded(self) -> str:
        """The text a lowering made by this pipeline records (``Lowered.pipeline``, reproducers)."""
        return self.anchored()

    def versions(self) -> tuple[str, ...]:
        """``pass@version`` of each pass of the user's own this pipeline runs (built-in passes are told by the
        package's digest): part of the key of every lowering made with it."""
        return ()
