"""Textual pass pipelines that mix pxla passes with jaxlib's own passes.

    builtin.module(pxla-a{k=v},canonicalize,func.func(cse),pxla-handoff-pipeline)

MLIR's pipeline parser cannot name Python passes, so this module resolves the
tree :mod:`.pipeline_syntax` parses: pxla passes become Python pass instances,
pxla pipelines expand in place, and every other element is validated and
canonicalized by jaxlib's own parser. :meth:`Pipeline.pass_manager` then builds ONE jaxlib ``PassManager``
that runs everything in order. ``str(pipeline)`` is the canonical, fully
expanded text (a jaxlib pipeline whose expansion does not parse again stays
as written); parsing it again gives the same text.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import os
import re
import sys
import tempfile
from typing import Literal

from jaxlib.mlir import ir, passmanager

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.core.diagnostics import DiagnosticCollector
from pxla_mlir.mlir.pass_infra import reproducer as reproducer_file
from pxla_mlir.mlir.pass_infra.base import ModulePass, NamedPipeline, Step
from pxla_mlir.mlir.pass_infra.census import Census
from pxla_mlir.mlir.pass_infra.guards import guards_for
from pxla_mlir.mlir.pass_infra.options import OptionError, option_fields, split_top_level
from pxla_mlir.mlir.pass_infra.pipeline_syntax import (
    ROOT_ANCHOR,
    Element,
    Parser,
    PipelineSyntaxError,
    pass_element,
    source_text,
    walk,
)
from pxla_mlir.mlir.pass_infra.plugins import resolve
from pxla_mlir.mlir.pass_infra.registry import REGISTRY
from pxla_mlir.mlir.support.lru import LRU

# PipelineSyntaxError, pass_element and ROOT_ANCHOR live in pipeline_syntax; this module's names for them stay.
__all__ = ["ROOT_ANCHOR", "Pipeline", "PipelineSyntaxError", "PipelineFailure", "pass_element", "run_pipeline",
           "save_reproducer"]

# -- resolved pipeline -----------------------------------------------------------

Verify = Literal["every-pass", "pxla-changes", "none"]


def _clean(s: str) -> str:
    return re.sub(r"\{\s+", "{", re.sub(r"(?<=\S)\s{2,}", " ", s))


@contextlib.contextmanager
def _stderr_captured():
    """LLVM prints why an option value is bad straight to file descriptor 2;
    keep it for the message instead. Yields a list that receives the text."""
    said: list[str] = []
    with tempfile.TemporaryFile() as f:
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError):  # no usable descriptor 2: nothing to capture
            yield said
            return
        os.dup2(f.fileno(), 2)
        try:
            yield said
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            f.seek(0)
            said.append(f.read().decode("utf-8", "replace"))


def did_you_mean(name: str) -> str:
    """``"; did you mean 'NAME'?"`` for the registered pass or pipeline spelled most like ``name``, or ``""``."""
    from pxla_mlir.mlir.pass_infra import jaxlib_passes

    known = [*REGISTRY.names(), *jaxlib_passes.MODULE_PASSES, *jaxlib_passes.FUNC_PASSES, *jaxlib_passes.PIPELINES]
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def _jaxlib_error(err: str, el: Element, ctx: ir.Context, llvm_said: str = "") -> str:
    m = re.search(r"for the --([\w-]+) option: (.+)", llvm_said)
    if m:  # an option value LLVM's command-line parser rejected
        reason = m.group(2).strip()
        return f"{el.name}: option '{m.group(1)}': {reason if len(reason) < 200 else reason[:200] + '...'}"
    m = re.search(r"'([^']*)' does not refer to a registered pass", llvm_said)
    if m:  # a pipeline in an option (inline{op-pipelines=...}) named an unknown pass
        return f"{el.name}: its options name an unknown pass or pipeline '{m.group(1)}'{did_you_mean(m.group(1))}"
    if "does not refer to a registered pass" in err:
        return (f"unknown pass or pipeline '{el.name}'{did_you_mean(el.name)} (pxla-opt --list-passes lists "
                f"them){REGISTRY.broken_note()}")
    m = re.search(r"no such option (\S+)", err)
    if m:
        valid = _jaxlib_option_names(el.name, ctx)
        return f"{el.name}: unknown option '{m.group(1)}'; valid options: {', '.join(valid) or 'none'}"
    lines = [l for l in err.splitlines() if "error:" in l] or err.strip().splitlines()[:1]
    return re.sub(r"^.*?error: ", "", lines[0]).strip()


def _jaxlib_option_names(name: str, ctx: ir.Context) -> list[str]:
    try:
        text = str(passmanager.PassManager.parse(f"{ROOT_ANCHOR}({name})", context=ctx))
    except ValueError:
        return []
    return re.findall(r"([\w-]+)=", text)


@dataclasses.dataclass(frozen=True)
class Pipeline:
    """Passes to run, in order: pxla pass instances, and jaxlib passes as their canonical text. A value: made
    from text (:meth:`parse`) or from a named pipeline's options (:meth:`of`); its text (``str``) is derived,
    for records, reproducers and keys."""

    steps: tuple[Step, ...]

    @classmethod
    def cached(cls, text: str, ctx: ir.Context | None = None) -> Pipeline:
        """Parsed once per process and registry generation (a pass registered again is resolved anew); a
        Pipeline builds PassManagers for any context. The first call parses in ``ctx`` (the caller holds
        it), or in a fresh context if none is given."""
        key = (text, REGISTRY.generation)
        pipeline = _PARSED.get(key)
        if pipeline is None:
            if ctx is None:
                from pxla_mlir.mlir.core.context import make_context

                ctx = make_context()
            else:
                from pxla_mlir.mlir.core.context import register_passes

                register_passes()  # jaxlib's textual passes, as make_context does
            pipeline = _PARSED[key] = cls.parse(text, ctx)
        return pipeline

    @classmethod
    def parse(cls, text: str, ctx: ir.Context) -> Pipeline:
        root = Parser(text).parse()
        steps: list[Step] = []
        for el in root.children or ():  # never None: parse() refuses a root without its parentheses
            steps.extend(_resolve(el, text, ctx, depth=0))
        return cls(tuple(_merge_text(steps)))

    @classmethod
    def of(cls, named: NamedPipeline, ctx: ir.Context | None = None) -> Pipeline:
        """The passes a named pipeline's options value runs (``PmapPipeline(mode="partition")``), as
        registered now: its steps as they are, text steps resolved; once per registry generation."""
        key = (named, REGISTRY.generation)
        pipeline = _EXPANDED.get(key)
        if pipeline is None:
            pipeline = _EXPANDED[key] = cls(tuple(_merge_text(_expand(named, ctx, depth=0))))
        return pipeline

    def __str__(self) -> str:
        return f"{ROOT_ANCHOR}({','.join(str(s) for s in self.steps)})"

    def plugins(self) -> tuple[str, ...]:
        """The pass plugins to load for this pipeline to parse again (what a reproducer records)."""
        return REGISTRY.specs_for(s.argument for s in self.steps if isinstance(s, ModulePass))

    def verified_at_end(self, verify: Verify) -> bool:
        """Whether the PassManager of this policy leaves the module verified:
        under ``"pxla-changes"``, when no jaxlib pass runs after the last pxla
        pass that may change the module (else the caller verifies before it
        prints: printing invalid IR can crash)."""
        if verify != "pxla-changes":
            return verify == "every-pass"
        changing = [s for s in self.steps if isinstance(s, str) or not s.checks_only]
        return not changing or not isinstance(changing[-1], str)

    def pass_manager(self, ctx: ir.Context, verify: Verify = "every-pass", *,
                     keep_main: bool = False) -> passmanager.PassManager:
        """One jaxlib PassManager running every step in order; ``keep_main``: a map's pipeline, whose plugin
        passes must leave @main's signature as the map launches it (:mod:`.plugin_checks`).

        ``verify``: ``"every-pass"`` runs MLIR's verifier after each pass (as
        mlir-opt does); ``"pxla-changes"`` only after each pxla pass that may
        change the module, so that no later pass sees IR a Python pass made
        invalid (jaxlib's passes keep valid IR valid); ``"none"`` leaves it to
        the caller. The verifier costs about as much as a pass over the module.
        """
        pm = passmanager.PassManager(ROOT_ANCHOR, context=ctx)
        pm.enable_verifier(verify == "every-pass")
        census, after_jaxlib = Census(), True  # the run's start: nothing known of the module yet
        for step in self.steps:
            if isinstance(step, str):
                for guard in guards_for(step):
                    guard.add_to(pm, census=census, after_jaxlib=after_jaxlib)
                    after_jaxlib = False
                pm.add(step)
                after_jaxlib = True
            else:
                # A plugin's pass is verified by its bridge whatever the policy: no later pass sees IR it broke,
                # and the error names the plugin.
                plugin = REGISTRY.is_registered(step.argument)
                step.add_to(pm, verify=verify == "pxla-changes" or plugin, keep_main=keep_main, census=census,
                            after_jaxlib=after_jaxlib)
                after_jaxlib = False
        return pm


#: Pipeline.cached's pipelines by text and registry generation, Pipeline.of's by options value and generation
#: (the generation moves when a pass is registered: older entries age out).
_PARSED: LRU = LRU(256)
_EXPANDED: LRU = LRU(256)
#: Canonical text of jaxlib pipeline elements by source text: passes are
#: registered process-wide, so the text does not depend on the context.
_CANONICAL: dict[str, str] = {}


def _merge_text(steps: list[Step]) -> list[Step]:
    out: list[Step] = []
    for s in steps:
        if isinstance(s, str) and out and isinstance(out[-1], str):
            out[-1] = f"{out[-1]},{s}"
        else:
            out.append(s)
    return out


def _resolve(el: Element, text: str, ctx: ir.Context | None, depth: int) -> list[Step]:
    if el.children is not None:  # nested anchor, e.g. func.func(cse): jaxlib only
        for child in walk(el):
            if REGISTRY.is_pxla_name(child.name):
                raise PipelineSyntaxError(
                    f"'{child.name}' runs on {ROOT_ANCHOR}; it cannot be nested inside "
                    f"'{el.name}(...)' (move it to the top level)", text, child.col)
        return [_canonical_jaxlib(el, text, ctx)]
    cls = resolve(el.name)
    if cls is None:
        return [_canonical_jaxlib(el, text, ctx)]
    try:
        instance = cls.from_options(el.options or "")
    except OptionError as e:
        raise PipelineSyntaxError(f"{e}{REGISTRY.origin(el.name)}", text, el.col) from None
    if isinstance(instance, ModulePass):
        return [instance]
    if depth > 16:
        raise PipelineSyntaxError(f"pipeline '{el.name}' expands into itself", text, el.col)
    return _expand(instance, ctx, depth + 1)


def _expand(named: NamedPipeline, ctx: ir.Context | None, depth: int) -> list[Step]:
    """A named pipeline's steps: pass instances as they are, text (jaxlib's passes, a map's own passes)
    resolved."""
    out: list[Step] = []
    for step in named.steps():
        if isinstance(step, str):
            text = f"{ROOT_ANCHOR}({step})"
            out += [s for child in Parser(text).parse().children or () for s in _resolve(child, text, ctx, depth)]
        else:
            out.append(step)
    return out


def _canonical_jaxlib(el: Element, text: str, ctx: ir.Context | None) -> str:
    source = source_text(el)
    if source not in _CANONICAL:
        from pxla_mlir.mlir.core.context import make_context, register_passes

        register_passes()  # jaxlib's textual passes, as make_context does (once per process)
        if ctx is None:  # a named pipeline expanded outside any context, a jaxlib pass seen first here
            ctx = make_context()
        _CANONICAL[source] = _canonical_text(el, source, text, ctx)
    return _CANONICAL[source]


def _canonical_text(el: Element, source: str, text: str, ctx: ir.Context) -> str:
    llvm_said: list[str] = []
    try:
        with _stderr_captured() as llvm_said:
            pm = passmanager.PassManager.parse(f"{ROOT_ANCHOR}({source})", context=ctx)
    except ValueError as e:  # the capture has closed: what LLVM printed is in llvm_said
        raise PipelineSyntaxError(_jaxlib_error(str(e), el, ctx, "".join(llvm_said)), text, el.col) from None
    for node in (el, *walk(el)):
        _check_lazy_pipeline(node, text, ctx)
    printed = _clean(str(pm)[len(ROOT_ANCHOR) + 1:-1])
    if not _parses(printed, ctx):
        # Some pipelines print passes that are not registered on their own (sdy's
        # pipelines print sdy-save-module): such an element stays as written.
        return source
    return printed


#: Options of jaxlib passes holding a pipeline that the pass parses only when it runs, ignoring one that does not
#: parse (the inliner prints an error and inlines without it): checked with the pipeline instead.
_LAZY_PIPELINE_OPTIONS = {"inline": "default-pipeline"}


def _check_lazy_pipeline(el: Element, text: str, ctx: ir.Context) -> None:
    option = _LAZY_PIPELINE_OPTIONS.get(el.name)
    if option is None or not el.options:
        return
    values = [item.partition("=")[2] for item in split_top_level(el.options, " ")
              if item.partition("=")[0] == option]
    for value in values:
        if value[:1] + value[-1:] in ("{}", "''", '""'):  # as LLVM's option parser, one level of quotes off
            value = value[1:-1]
        if not value.strip():
            continue
        llvm_said: list[str] = []
        try:  # the inliner runs it on each callable: func.func here
            with _stderr_captured() as llvm_said:
                passmanager.PassManager.parse(f"{ROOT_ANCHOR}(func.func({value}))", context=ctx)
        except ValueError as e:
            said = str(e) + "".join(llvm_said)
            unknown = re.search(r"'([^']*)' does not refer to a registered pass", said)
            reason = (f"unknown pass or pipeline '{unknown[1]}'{did_you_mean(unknown[1])} "
                      f"(pxla-opt --list-passes lists them)") if unknown else \
                _jaxlib_error(str(e), Element(value, el.col), ctx, "".join(llvm_said))
            raise PipelineSyntaxError(f"{el.name}: option '{option}': {reason}", text, el.col) from None


def _parses(elements: str, ctx: ir.Context) -> bool:
    try:
        with _stderr_captured():
            passmanager.PassManager.parse(f"{ROOT_ANCHOR}({elements})", context=ctx)
    except ValueError:
        return False
    return True


# -- running -----------------------------------------------------------------------

class PipelineFailure(PxlaUserError, RuntimeError):
    """A pipeline failed on a module; carries the diagnostics and a reproducer."""

    def __init__(self, pipeline: Pipeline, diagnostics, reproducer: str | None):
        self.pipeline, self.diagnostics, self.reproducer = pipeline, diagnostics, reproducer
        lines = [d.format() for d in diagnostics] or ["pass pipeline failed"]
        if reproducer:
            lines.append(f"reproduce with: {reproducer_file.rerun_command(reproducer)}")
        super().__init__("\n".join(lines))


def save_reproducer(module_text: str, pipeline: Pipeline, *, verify_each: bool) -> str | None:
    """Saves the module a pipeline failed on with the trailer naming the pipeline, as it ran; returns the path."""
    return reproducer_file.save(module_text, reproducer_file.Recorded(str(pipeline), verify_each=verify_each,
                                                                      plugins=pipeline.plugins()))


def run_pipeline(module: ir.Module, pipeline: Pipeline | str, *, reproducer: bool = True,
                 verify_each: bool = True, keep_main: bool = False) -> Pipeline:
    """Runs ``pipeline`` on ``module`` in place (the library twin of pxla-opt).

    Raises :class:`PipelineFailure` with located diagnostics and, if
    ``reproducer``, the path of the input saved for a ``pxla-opt`` rerun
    (see :mod:`.reproducer` for where).
    ``verify_each=False`` verifies the module once at the end instead of
    after every pass (the verifier is a third of a short pipeline's time).
    ``keep_main``: a map's pipeline (see :meth:`Pipeline.pass_manager`).
    """
    ctx = module.context
    if isinstance(pipeline, str):
        pipeline = Pipeline.parse(pipeline, ctx)
    before = ir_utils.asm_text(module.operation, debug_info=True) if reproducer else None
    with DiagnosticCollector(ctx) as diags:
        try:
            pm = pipeline.pass_manager(ctx, "every-pass" if verify_each else "none", keep_main=keep_main)
            pm.run(module.operation)
            if not verify_each:
                module.operation.verify()
            return pipeline
        except ir.MLIRError as e:
            diags.add_error(e)
            failure = diags.diagnostics
    saved = None if before is None else save_reproducer(before, pipeline, verify_each=verify_each)
    raise PipelineFailure(pipeline, failure, saved)


def describe_options(cls) -> list[str]:
    return [f"{i.name}=<{i.type_name()}> (default {i.default!r}): {i.help}" for i in option_fields(cls)]
