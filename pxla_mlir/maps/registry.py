"""Every map kind, by name (see :mod:`.kind`).

An entry says what the command line needs to know about a kind without
loading it (its pipeline, the flags that map a plain function with it, the
flags that also apply to an object already mapped with it), and where the
:class:`~.kind.MapKind` itself lives: "module:attribute", loaded on first
use (loading it imports the kind's package, which wires its primitive's
rules, and jax). The first kind also lowers ``pxla_mlir.jit`` functions that
hold no map. This module and :mod:`.kind` are jax-free.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib

from pxla_mlir.maps.kind import CliFlag, MapKind

__all__ = ["KindEntry", "KINDS", "get", "kinds", "kind_of", "kind_of_eqn", "pipeline", "cli_flags", "options"]


@dataclasses.dataclass(frozen=True)
class KindEntry:
    kind: str  # "module:attribute" of the MapKind
    pipeline: str  # "module:Class" of its NamedPipeline (its options are the API's and the CLI's)
    cli_flags: tuple[CliFlag, ...] = ()  # flags that map a plain function (--map NAME)
    object_flags: tuple[str, ...] = ()  # flags that also apply to an already mapped object (xmap: its mesh)
    options: tuple[CliFlag, ...] = ()  # the API's options besides its pipeline's, which with_options takes too


_LITERAL = "a Python literal: 0, (0, None), ['batch', ...], ..."

KINDS: dict[str, KindEntry] = {
    "pmap": KindEntry("pxla_mlir.pmaps.kind:PMAP", "pxla_mlir.mlir.pipelines:PmapPipeline",
                      (CliFlag("axis_name", "the axis name", literal=False), CliFlag("in_axes", _LITERAL),
                       CliFlag("out_axes", "a Python literal, like --in-axes")),
                      options=(CliFlag("pieces", "nested pmaps' values enter and leave by piece where they can "
                                                 "(off: 2022's layout, replicated over the inner devices)",
                                       literal=False, choices=("on", "off")),)),
    "xmap": KindEntry("pxla_mlir.xmaps.kind:XMAP", "pxla_mlir.mlir.pipelines:XmapPipeline",
                      (CliFlag("in_axes", _LITERAL, required=True),
                       CliFlag("out_axes", "a Python literal, like --in-axes", required=True),
                       CliFlag("axis_resources", "{'batch': 'x'}"), CliFlag("axis_sizes", "{'k': 4}"),
                       CliFlag("mesh", "the mesh as sizes:names, e.g. 2x4:x,y", literal=False)),
                      object_flags=("mesh",)),
}


def _load(target: str):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


@functools.cache
def get(name: str) -> MapKind:
    return _load(KINDS[name].kind)


@functools.cache
def pipeline(name: str) -> type:
    """A kind's NamedPipeline class (jax-free: pipelines hold only options and pass lists)."""
    return _load(KINDS[name].pipeline)


def cli_flags(name: str) -> tuple[CliFlag, ...]:
    return KINDS[name].cli_flags


def options(name: str) -> dict[str, tuple[str, tuple[str, ...] | None]]:
    """A kind's options as its API and the command line name them: its pipeline's and its own
    (name -> (help, its choices; None for free text)); ``with_options`` takes every one."""
    from pxla_mlir.mlir.pipelines import EXTRA_PASSES, api_options

    options = api_options(pipeline(name))
    own = {EXTRA_PASSES: options.pop(EXTRA_PASSES)} if EXTRA_PASSES in options else {}  # stays last
    return {**options, **{f.field: (f.help, f.choices) for f in KINDS[name].options}, **own}


def kinds() -> tuple[MapKind, ...]:
    return tuple(get(name) for name in KINDS)


def kind_of(fn) -> MapKind | None:
    """The kind of a mapped function (a pmap, an xmap), or None."""
    return next((k for k in kinds() if isinstance(fn, k.function_type)), None)


def kind_of_eqn(eqn) -> MapKind | None:
    """The kind of a map equation of a jaxpr, or None."""
    return next((k for k in kinds() if k.owns(eqn)), None)
