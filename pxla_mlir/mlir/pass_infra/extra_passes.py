"""A map's own passes: ``extra_passes=`` of pmap, xmap and ``pxla_mlir.jit``.

    pxla_mlir.pmap(f, extra_passes="my-pass{n=2},canonicalize")
    pxla_mlir.pmap(f, extra_passes={"pxla": "my-check", "mhlo": "builtin.module(my-pass{n=2})"})

A string is pipeline text as ``pxla-opt -p`` takes it (anchored on
``builtin.module(...)`` or the bare element list) and runs on the final
MHLO; a mapping names the stage of each: ``"pxla"`` runs on the pxla form
(legalized to MHLO, the placeholders not yet expanded, checked again by
``pxla-verify-form`` after it), ``"mhlo"`` on the final MHLO. The map
pipelines (:mod:`pxla_mlir.mlir.pipelines`) hold them as the options
``pxla-passes``, ``mhlo-passes`` and ``pass-versions``; ``pxla-verify-handoff``
runs after both, so no pass hands XLA a module it would not accept.

A map holds the text; where it lowers, the text is resolved as the registry
has the passes then, and every pass's version is part of the lowering's key
(:func:`own_pass_versions`), so a pass
registered again with another version never reuses a lowering made by the
old one. The text a lowering records (``Lowered.pipeline``) adds
``pass-versions``, the ``version`` each of these passes had
(``my-pass@2``): a replay with another version is refused
(:func:`check_versions`). The text is checked eagerly
(:func:`extra_pass_options`): a typo is an :class:`ExtraPassesError` naming
the keyword, when the map is made.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.pass_infra.base import ModulePass
from pxla_mlir.mlir.pass_infra.pipeline_syntax import ROOT_ANCHOR, Parser, PipelineSyntaxError
from pxla_mlir.mlir.pass_infra.plugins import resolve
from pxla_mlir.mlir.pass_infra.registry import REGISTRY
from pxla_mlir.mlir.support.lru import LRU

__all__ = ["EXTRA_FIELDS", "STAGES", "ExtraPassesError", "check_versions", "extra_pass_options", "own_pass_versions",
           "own_passes", "unbraced"]

#: The stages a mapping given to ``extra_passes=`` may name, and the pipeline option each sets.
STAGES = {"pxla": "pxla_passes", "mhlo": "mhlo_passes"}
#: The map pipelines' options that hold a map's own passes (left out of their text when empty).
EXTRA_FIELDS = ("pxla_passes", "mhlo_passes", "pass_versions")
_VERSION = re.compile(r"[\w.+-]+")


class ExtraPassesError(PxlaUserError, ValueError):
    """``extra_passes=`` that does not parse, names an unknown pass or option, or has an unknown stage."""


def unbraced(text: str) -> str:
    """An option value without the one level of braces that quotes it in pipeline text."""
    text = text.strip()
    return text[1:-1].strip() if text.startswith("{") and text.endswith("}") else text


def _elements(text: str) -> str:
    """The element list of pipeline text, anchored or not."""
    text = text.strip()
    if text.startswith(f"{ROOT_ANCHOR}(") and text.endswith(")"):
        return text[len(ROOT_ANCHOR) + 1:-1].strip()
    return text


def _canonical(text: str, keyword: str) -> tuple[str, list[ModulePass]]:
    """The canonical element text of one stage's passes, and its pxla passes; raises ExtraPassesError."""
    from pxla_mlir.mlir.pass_infra.pipeline import Pipeline

    if not isinstance(text, str):
        raise ExtraPassesError(f"{keyword} must be pipeline text (a str such as \"my-pass{{n=2}},canonicalize\"), "
                               f"got {type(text).__name__} {text!r}")
    elements = _elements(text)
    if not elements:
        return "", []
    try:
        pipeline = Pipeline.cached(f"{ROOT_ANCHOR}({elements})")
    except PipelineSyntaxError as e:
        raise ExtraPassesError(e.format().replace("<pass-pipeline>", keyword, 1)) from None
    passes = [s for s in pipeline.steps if isinstance(s, ModulePass)]
    return str(pipeline)[len(ROOT_ANCHOR) + 1:-1], passes


def _check_versions_readable(passes: list[ModulePass], keyword: str) -> None:
    for p in passes:
        version = str(type(p).version)
        if not _VERSION.fullmatch(version):
            raise ExtraPassesError(f"{keyword}: pass '{p.argument}' declares version {version!r}: a version is "
                                   f"letters, digits, '.', '+' and '-' (e.g. version = \"2\")")


def extra_pass_options(value, keyword: str = "extra_passes") -> dict:
    """The map pipeline options (``pxla_passes``, ``mhlo_passes``) of ``extra_passes=``: {} for None or "";
    raises :class:`ExtraPassesError` naming ``keyword`` if the text does not parse."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        unknown = [k for k in value if k not in STAGES]
        if unknown:
            from pxla_mlir.mlir.support.suggest import did_you_mean

            raise ExtraPassesError(f"{keyword} has no stage {unknown[0]!r}{did_you_mean(str(unknown[0]), STAGES)}; "
                                   f"the stages are 'pxla' (the pxla form, before the placeholders expand) and "
                                   f"'mhlo' (the final MHLO, before pxla-verify-handoff)")
        stages = dict(value)
    else:
        stages = {"mhlo": value}
    options: dict = {}
    passes: list[ModulePass] = []
    for stage, text in stages.items():
        elements, found = _canonical(text, f"{keyword}[{stage!r}]" if isinstance(value, Mapping) else keyword)
        if elements:
            options[STAGES[stage]] = elements
            passes += found
    _check_versions_readable(passes, keyword)
    return options


def own_passes(options: Any) -> bool:
    """Does a map pipeline's options value hold passes of the map's own?"""
    return bool(options.pxla_passes or options.mhlo_passes)


def own_pass_versions(options: Any) -> tuple[str, ...]:
    """``pass@version`` of each pxla pass among a map pipeline's own passes (``options.pxla_passes`` and
    ``options.mhlo_passes``), as registered now: with the pipeline's text, what decides the passes a lowering
    ran (the built-in passes are told by the package's own digest), and the ``pass-versions`` of the text a
    lowering records. Which class each name is is resolved once per registry generation; its ``version`` is
    read each time (a class changed in place is another version too)."""
    if not own_passes(options):
        return ()
    key = (options.pxla_passes, options.mhlo_passes, REGISTRY.generation)
    classes = _CLASSES.get(key)
    if classes is None:
        found = {}
        for text in (options.pxla_passes, options.mhlo_passes):
            for el in (Parser(f"{ROOT_ANCHOR}({text})").parse().children or ()) if text else ():
                cls = resolve(el.name) if el.children is None else None
                if cls is not None and issubclass(cls, ModulePass):
                    found[el.name] = cls
        classes = _CLASSES[key] = tuple(found.items())
    return tuple(f"{name}@{cls.version}" for name, cls in classes)


#: own_pass_versions' classes by the passes' text and the registry's generation.
_CLASSES = LRU(256)


def check_versions(argument: str, versions: tuple[str, ...]) -> None:
    """Raises :class:`ExtraPassesError` unless every ``pass@version`` names a registered pass of that version."""
    for entry in versions:
        name, at, version = entry.rpartition("@")
        cls = resolve(name) if at else None
        if cls is None:
            raise ExtraPassesError(f"{argument}: pass-versions names {entry!r}, which is not a registered pass at a "
                                   f"version (pass@version): load the plugin that defines it "
                                   f"(--load-pass-plugin) or drop the entry")
        if str(cls.version) != version:
            raise ExtraPassesError(f"{argument}: pass-versions says {name} is version {version}, but the registered "
                                   f"{name} is version {cls.version}: the pipeline text was made with another "
                                   f"version of the pass; make it again (lower the map again)")
