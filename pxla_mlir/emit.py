"""Emitting MHLO for a function from the command line (and from Python).

:func:`lower_target` turns a target plus map options into a ``Lowered``;
:func:`stage_text` prints any stage of it: the imported pxla form, the
module after a named pass, the final MHLO (optionally exported as StableHLO)
or XLA's optimized HLO; :func:`run_stepwise` replays a pipeline one pass at a
time and can dump every step to ``NN_<pass>.mlir``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from typing import Any, Callable, Sequence

from jaxlib.mlir import ir

from .compile import to_stablehlo
from .ir.context import make_context
from .pass_infra import Pipeline, PipelineSyntaxError, run_pipeline
from .pass_infra.options import option_fields, split_top_level
from .pipelines import PmapPipeline, XmapPipeline
from .targets import ArgSpec, Examples, TargetError, examples_of, literal, parse_arg, parse_mesh, resolve

STAGES = ("pxla", "mhlo", "xla")  # plus "after:<pass>"


@dataclasses.dataclass
class MapOptions:
    """How to map a plain function (ignored for pxla_mlir.pmap/xmap objects)."""

    map: str | None = None  # "pmap" | "xmap"
    axis_name: str | None = None
    in_axes: str | None = None  # Python literals, as on the command line
    out_axes: str | None = None
    mode: str | None = None
    unshard: str | None = None
    lowering: str | None = None
    shardings: str | None = None  # "sdy" | "gspmd", both maps
    axis_resources: str | None = None
    axis_sizes: str | None = None
    mesh: str | None = None
    args: Sequence[str] = ()

    def overrides(self) -> dict:
        """pxla_mlir options to set on an already-mapped function."""
        return {k: v for k, v in (("mode", self.mode), ("unshard", self.unshard), ("lowering", self.lowering),
                                  ("shardings", self.shardings)) if v is not None}


#: What each map takes on the command line besides its pipeline's options
#: (``mode``/``unshard`` for pmap, ``lowering`` for xmap, from pipelines.py).
_SHAPE_FLAGS = {"pmap": ("axis_name", "in_axes", "out_axes"),
                "xmap": ("in_axes", "out_axes", "axis_resources", "axis_sizes", "mesh")}
_PIPELINES = {"pmap": PmapPipeline, "xmap": XmapPipeline}


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _check_flags(kind: str, given: list[str], plain: bool, name: str) -> None:
    """Every flag given must apply to this map: none is silently ignored."""
    options = [i.api_name or i.field for i in option_fields(_PIPELINES[kind])]  # as the API and CLI call them
    allowed = [*_SHAPE_FLAGS[kind], *options] if plain else options + ["mesh"] * (kind == "xmap")
    wrong = [f for f in given if f not in allowed]
    if not wrong:
        return
    takes = ", ".join(map(_flag, allowed))
    if plain:
        raise TargetError(f"{_flag(wrong[0])} does not apply to --map {kind} ({kind} takes {takes})")
    raise TargetError(f"{_flag(wrong[0])} does not apply to {name!r}, which is already a pxla_mlir.{kind} "
                      f"(on the command line it takes {takes})")


def _mapped(fn: Callable, opts: MapOptions) -> Any:
    from .pmaps import PmapFunction, pmap
    from .xmaps import XmapFunction, xmap

    given = [f.name for f in dataclasses.fields(opts) if f.name not in ("map", "args") and getattr(opts, f.name)
             is not None]
    if isinstance(fn, (PmapFunction, XmapFunction)):
        kind = "pmap" if isinstance(fn, PmapFunction) else "xmap"
        if opts.map not in (None, kind):
            raise TargetError(f"--map {opts.map} does not apply to {fn.__name__!r}, which is already a "
                              f"pxla_mlir.{kind}")
        _check_flags(kind, given, False, fn.__name__)
        return _with_overrides(fn, opts.overrides())
    if opts.map in _SHAPE_FLAGS:
        _check_flags(opts.map, given, True, "")
    if opts.map is None:
        raise TargetError(f"{getattr(fn, '__name__', fn)!r} is a plain function: give --map pmap or --map xmap "
                          f"(or decorate it with pxla_mlir.pmap/xmap)")
    if opts.map == "pmap":
        kw: dict = {}
        if opts.in_axes is not None:
            kw["in_axes"] = literal(opts.in_axes, "--in-axes")
        if opts.out_axes is not None:
            kw["out_axes"] = literal(opts.out_axes, "--out-axes")
        return pmap(fn, opts.axis_name, mode=opts.mode or PmapPipeline.mode,
                    unshard=opts.unshard or PmapPipeline.unshard,
                    shardings=opts.shardings or PmapPipeline.sharding_dialect, **kw)
    if opts.map == "xmap":
        if opts.in_axes is None or opts.out_axes is None:
            raise TargetError("--map xmap needs --in-axes and --out-axes (e.g. \"['batch', ...]\")")
        return xmap(fn, literal(opts.in_axes, "--in-axes"), literal(opts.out_axes, "--out-axes"),
                    axis_resources=literal(opts.axis_resources, "--axis-resources") if opts.axis_resources else {},
                    axis_sizes=literal(opts.axis_sizes, "--axis-sizes") if opts.axis_sizes else {},
                    lowering=opts.lowering or XmapPipeline.lowering,
                    shardings=opts.shardings or XmapPipeline.sharding_dialect)
    raise TargetError(f"--map must be pmap or xmap, got {opts.map!r}")


def _with_overrides(fn, overrides: dict):
    if not overrides:
        return fn
    try:
        return fn.with_options(**overrides)
    except TypeError as e:
        raise TargetError(f"{e} (pmap takes --mode/--unshard/--shardings, xmap takes --lowering/--shardings)") from None


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
        from .sharding import Mesh, MeshError

        sizes, names = parse_mesh(mesh_text)
        try:
            mesh = Mesh.create(sizes, names)
        except MeshError as e:
            raise TargetError(str(e)) from None
    mapped = _mapped(fn, opts)
    _check_mapped_sizes(mapped, args)
    return Prepared(mapped, args, mesh)


def _check_mapped_sizes(fn, args: tuple[ArgSpec, ...]) -> None:
    """A pmap over a size-0 axis has no devices to run on: say which --arg."""
    from .pmaps import PmapFunction

    if not isinstance(fn, PmapFunction):
        return
    axes = fn.in_axes
    per_arg = [axes] * len(args) if axes is None or isinstance(axes, int) else list(axes)
    if len(per_arg) != len(args):
        return  # the pmap itself reports the mismatch
    for i, (axis, spec) in enumerate(zip(per_arg, args)):
        if isinstance(axis, int) and -len(spec.shape) <= axis < len(spec.shape) and spec.shape[axis] == 0:
            raise TargetError(f"argument {i} ({spec}) has size 0 along its mapped axis {axis}: a pmap needs "
                              f"one device per index, so give that dimension a positive size")


def lower_target(target: str, opts: MapOptions):
    prepared = prepare(target, opts)
    with prepared.context():
        return prepared.fn.lower(*[a.struct() for a in prepared.args])


# -- stages ------------------------------------------------------------------------------------

def elementary_steps(pipeline: Pipeline) -> list:
    """One entry per pass: pxla pass instances, and single jaxlib pass texts."""
    steps: list = []
    for step in pipeline.steps:
        steps.extend(split_top_level(step, ",") if isinstance(step, str) else [step])
    return steps


def step_name(step) -> str:
    """A pass's argument; for a nested pass (``func.func(cse)``) the inner one."""
    if not isinstance(step, str):
        return step.argument
    return re.findall(r"[\w.\-]+", step.rpartition("(")[2])[0]


def run_stepwise(module_text: str, pipeline_text: str, *, stop_after: str | None = None,
                 dump_dir: str | None = None) -> ir.Module:
    """Runs ``pipeline_text`` on the module one pass at a time."""
    ctx = make_context()
    try:
        pipeline = Pipeline.parse(pipeline_text, ctx)
    except PipelineSyntaxError as e:
        raise TargetError(f"bad --pipeline: {e.message}") from None
    steps = elementary_steps(pipeline)
    names = [step_name(s) for s in steps]
    if stop_after is not None and stop_after not in names:
        raise TargetError(f"unknown stage 'after:{stop_after}': the pipeline runs {', '.join(names)}")
    with ctx:
        module = ir.Module.parse(module_text)
    if dump_dir:
        os.makedirs(dump_dir, exist_ok=True)
        _dump(dump_dir, 0, "input", module)
    for index, (step, name) in enumerate(zip(steps, names), start=1):
        run_pipeline(module, Pipeline((step,)), reproducer=False)
        if dump_dir:
            _dump(dump_dir, index, name, module)
        if name == stop_after:
            break
    return module


def _dump(directory: str, index: int, name: str, module: ir.Module) -> None:
    with open(os.path.join(directory, f"{index:02d}_{name}.mlir"), "w") as f:
        f.write(module.operation.get_asm(enable_debug_info=False))


def stage_text(lowered, stage: str = "mhlo", *, pipeline: str | None = None, dump_dir: str | None = None,
               dialect: str = "mhlo") -> str:
    """The text of one stage of a lowering (see the module docs)."""
    if dialect not in ("mhlo", "stablehlo"):
        raise TargetError(f"--dialect must be mhlo or stablehlo, got {dialect!r}")
    if stage not in STAGES and not stage.startswith("after:"):
        raise TargetError(f"unknown stage {stage!r}: use pxla, mhlo, xla or after:<pass>")
    if stage == "pxla":
        return lowered.pxla_text()
    if stage == "xla":
        if pipeline is not None:
            raise TargetError("--stage xla compiles the map's own pipeline; drop --pipeline")
        return lowered.compile().as_text()
    stop = stage.split(":", 1)[1] if stage.startswith("after:") else None
    if pipeline is None and stop is None and dump_dir is None:
        return lowered.as_text(dialect)
    module = run_stepwise(lowered.pxla_text(debug_info=True), pipeline or lowered.pipeline, stop_after=stop,
                          dump_dir=dump_dir)
    if dialect == "stablehlo":
        module = to_stablehlo(module)
    return module.operation.get_asm(enable_debug_info=False)
