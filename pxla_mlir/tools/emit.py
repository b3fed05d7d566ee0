"""Emitting MHLO for a function from the command line (and from Python).

:func:`lower_target` turns a target plus map options into a ``Lowered``;
:func:`stage_text` prints any stage of it: the imported pxla form, the
module after a named pass (replayed one pass at a time by
:mod:`pxla_mlir.mlir.pass_infra.stepwise`, optionally dumping every step to
``NN_<pass>.mlir``), the final MHLO (optionally exported as StableHLO) or
XLA's optimized HLO.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

from jaxlib.mlir import ir

from pxla_mlir.maps import registry
from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.mlir.core.ir_utils import asm_text
from pxla_mlir.mlir.pass_infra import Pipeline, PipelineFailure, PipelineSyntaxError
from pxla_mlir.mlir.pass_infra.pipeline import save_reproducer
from pxla_mlir.mlir.pass_infra.stepwise import OnStep, UnknownStepError, run_stepwise
from pxla_mlir.mlir.pipelines import to_stablehlo
from pxla_mlir.mlir.support.files import write_atomically
from pxla_mlir.mlir.support.suggest import closest, did_you_mean
from pxla_mlir.tools.errors import Choices
from pxla_mlir.tools.targets import ArgSpec, Examples, TargetError, examples_of, literal, parse_arg, parse_mesh, resolve

STAGES = ("pxla", "mhlo", "hlo", "xla")  # plus "after:<pass>"
#: --stage's choices, as argparse checks them (after:<pass> is any pass of the pipeline).
STAGE_CHOICES = Choices(STAGES, open_prefixes=("after:",))


def pipeline_options(kind: str) -> list[str]:
    """A kind's options (its pipeline's and its own) as the API and the command line call them."""
    return list(registry.options(kind))


def map_flags() -> tuple[str, ...]:
    """Every flag that says how to map (as fields): --map, each kind's shape flags and pipeline options."""
    fields: dict[str, None] = {"map": None}
    for kind in registry.KINDS:
        fields.update(dict.fromkeys(f.field for f in registry.cli_flags(kind)))
        fields.update(dict.fromkeys(pipeline_options(kind)))
    return tuple(fields)


class MapOptions:
    """How to map a plain function (``map``: a kind's name, and that kind's
    flags as command-line strings, by field: ``in_axes="['b', ...]"``, ``mode="partition"``), or
    which pipeline options to set on a pmap/xmap object; ``args`` are argument shapes."""

    def __init__(self, map: str | None = None, args: Sequence[str] = (), **flags):
        unknown = sorted(set(flags) - set(map_flags()))
        if unknown:
            raise TypeError(f"MapOptions has no flag {unknown[0]!r}; flags: {', '.join(map_flags()[1:])}")
        self.map, self.args = map, tuple(args)
        self.flags = {k: v for k, v in flags.items() if v is not None}

    def __getattr__(self, name: str):
        if name in map_flags():
            return self.flags.get(name)
        raise AttributeError(name)

    def replace(self, **changes) -> MapOptions:
        args = changes.pop("args", self.args)
        return MapOptions(changes.pop("map", self.map), args, **{**self.flags, **changes})

    def given(self) -> list[str]:
        return list(self.flags)


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _check_flags(kind, given: list[str], plain: bool, name: str) -> None:
    """Every flag given must apply to this map: none is silently ignored."""
    entry = registry.KINDS[kind.name]
    options = pipeline_options(kind.name)
    allowed = [*(f.field for f in entry.cli_flags), *options] if plain else [*options, *entry.object_flags]
    wrong = [f for f in given if f not in allowed]
    if not wrong:
        return
    takes = ", ".join(map(_flag, allowed))
    if plain:
        raise TargetError(f"{_flag(wrong[0])} does not apply to --map {kind.name} ({kind.name} takes {takes})")
    raise TargetError(f"{_flag(wrong[0])} does not apply to {name!r}, which is already a pxla_mlir.{kind.name} "
                      f"(on the command line it takes {takes})")


def _mapped(fn: Callable, opts: MapOptions) -> Any:
    given = opts.given()
    kind = registry.kind_of(fn)
    if kind is not None:
        if opts.map not in (None, kind.name):
            raise TargetError(f"--map {opts.map} does not apply to {fn.__name__!r}, which is already a "
                              f"pxla_mlir.{kind.name}")
        _check_flags(kind, given, False, fn.__name__)
        return _with_overrides(fn, _given_options(kind, opts))
    names = list(registry.KINDS)
    if opts.map is None:
        raise TargetError(f"{getattr(fn, '__name__', fn)!r} is a plain function: give "
                          f"{' or '.join(f'--map {n}' for n in names)} (or decorate it with "
                          f"pxla_mlir.{'/'.join(names)})")
    if opts.map not in names:
        raise TargetError(f"--map must be {' or '.join(names)}, got {opts.map!r}{did_you_mean(opts.map, names)}")
    kind = registry.get(opts.map)
    _check_flags(kind, given, True, "")
    flag_specs = registry.cli_flags(kind.name)
    missing = [_flag(f.field) for f in flag_specs if f.required and not getattr(opts, f.field)]
    if missing:
        raise TargetError(f"--map {kind.name} needs {' and '.join(missing)} (Python literals, e.g. "
                          f"\"['batch', ...]\")")
    flags = {f.field: literal(getattr(opts, f.field), _flag(f.field)) if f.literal else getattr(opts, f.field)
             for f in flag_specs if getattr(opts, f.field)}  # an empty value is the flag's default
    return kind.from_cli(fn, flags, _given_options(kind, opts))


def _given_options(kind, opts: MapOptions) -> dict:
    return {k: getattr(opts, k) for k in pipeline_options(kind.name) if getattr(opts, k) is not None}


def _with_overrides(fn, overrides: dict):
    return fn.with_options(**overrides) if overrides else fn  # _check_flags let through only its options


@dataclasses.dataclass
class Prepared:
    """A mapped function, its example arguments and the mesh to lower in."""

    fn: Any
    args: tuple[ArgSpec, ...]
    mesh: Any  # pxla_mlir.Mesh or None

    def context(self):
        return self.mesh if self.mesh is not None else contextlib.nullcontext()


def prepare(target: str, opts: MapOptions) -> Prepared:
    fn = resolve(target)
    declared: Examples | None = examples_of(fn)
    args = tuple(parse_arg(a) for a in opts.args) if opts.args else (declared.args if declared else ())
    if not args:
        raise TargetError(f"no argument shapes for {target!r}: pass --arg f32[8,128] (one per argument) or "
                          f"declare them with @pxla_mlir.example_args")
    mesh_text = opts.mesh or (declared.mesh if declared else None)
    mesh = None
    if mesh_text is not None:
        from pxla_mlir.mlir.sharding import Mesh, MeshError

        sizes, names = parse_mesh(mesh_text)
        try:
            mesh = Mesh.create(sizes, names)
        except MeshError as e:
            raise TargetError(str(e)) from None
    mapped = _mapped(fn, opts)
    _check_mapped_sizes(mapped, args)
    return Prepared(mapped, args, mesh)


def _check_mapped_sizes(fn, args: tuple[ArgSpec, ...]) -> None:
    """A kind may refuse example shapes before lowering (a pmap over a size-0 axis): say which --arg."""
    kind = registry.kind_of(fn)
    problem = kind.check_example_shapes(fn, [a.shape for a in args]) if kind is not None else None
    if problem is not None:
        index, why = problem
        raise TargetError(f"argument {index} ({args[index]}) {why}")


def lower_target(target: str, opts: MapOptions):
    prepared = prepare(target, opts)
    with prepared.context():
        return prepared.fn.lower(*[a.struct() for a in prepared.args])


# -- stages ------------------------------------------------------------------------------------

def replay(module_text: str, pipeline_text: str, *, stop_after: str | None = None,
           dump_dir: str | None = None) -> ir.Module:
    """Runs ``pipeline_text`` on the module one pass at a time (see
    :func:`pxla_mlir.mlir.pass_infra.stepwise.run_stepwise`), dumping each step to
    ``dump_dir/NN_<pass>.mlir``."""
    ctx = make_context()
    try:
        pipeline = Pipeline.parse(pipeline_text, ctx)
    except PipelineSyntaxError as e:
        raise TargetError(f"bad --pipeline: {e.message}") from None
    with ctx:
        module = ir.Module.parse(module_text)
    on_step: OnStep | None = None
    if dump_dir:
        if os.path.exists(dump_dir) and not os.path.isdir(dump_dir):
            raise TargetError(f"--dump-dir {dump_dir!r} is a file: give a directory (made if missing)")
        input_text = asm_text(module.operation)

        def dump_step(index: int, name: str, module: ir.Module, _seconds: float) -> None:
            if index == 1:  # the input too, once the pipeline is known to reach the stage asked for
                _dump(dump_dir, 0, "input", input_text)
            _dump(dump_dir, index, name, asm_text(module.operation))

        on_step = dump_step
    try:
        return run_stepwise(module, pipeline, stop_after=stop_after, on_step=on_step)
    except UnknownStepError as e:
        close = closest(e.name, e.names)
        hint = f"; did you mean 'after:{close}'?" if close else ""
        raise TargetError(f"unknown stage 'after:{e.name}': the pipeline runs {', '.join(e.names)}{hint}") from None
    except PipelineFailure as e:  # a step failed: the reproducer is the whole pipeline on the module it got
        saved = save_reproducer(module_text, pipeline, verify_each=True)
        raise PipelineFailure(pipeline, e.diagnostics, saved) from None


def _dump(directory: str, index: int, name: str, text: str) -> None:
    path = os.path.join(directory, f"{index:02d}_{name}.mlir")
    try:
        os.makedirs(directory, exist_ok=True)
        write_atomically(path, text)
    except OSError as e:
        raise TargetError(f"--dump-dir {directory!r}: cannot write {path!r} ({e.strerror}); give a directory "
                          f"that can be created and written") from None


def stage_text(lowered, stage: str = "mhlo", *, pipeline: str | None = None, dump_dir: str | None = None,
               dialect: str = "mhlo") -> str:
    """The text of one stage of a lowering (see the module docs)."""
    if dialect not in ("mhlo", "stablehlo"):
        raise TargetError(f"--dialect must be mhlo or stablehlo, got {dialect!r}"
                          f"{did_you_mean(dialect, ('mhlo', 'stablehlo'))}")
    if stage not in STAGE_CHOICES:
        raise TargetError(f"unknown stage {stage!r}: use pxla, mhlo, hlo, xla or after:<pass>"
                          f"{did_you_mean(stage, STAGE_CHOICES)}")
    if stage == "pxla":
        return lowered.pxla_text()
    if stage in ("hlo", "xla"):
        if pipeline is not None:
            raise TargetError(f"--stage {stage} converts the map's own pipeline's result; drop --pipeline")
        return lowered.as_text("hlo") if stage == "hlo" else lowered.compile().as_text()
    stop = stage.split(":", 1)[1] if stage.startswith("after:") else None
    if pipeline is None and stop is None and dump_dir is None:
        return lowered.as_text(dialect)
    module = replay(lowered.pxla_text(debug_info=True), pipeline or lowered.pipeline, stop_after=stop,
                    dump_dir=dump_dir)
    if dialect == "stablehlo":
        module = to_stablehlo(module)
    return asm_text(module.operation)
