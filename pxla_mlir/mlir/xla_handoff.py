"""A module from text made ready for XLA (jax-free): read, parsed, taken
through the pipelines it needs, and checked for what makes jaxlib abort.

:func:`prepare` takes what pxla_mlir and jax write:

* final MHLO (``pxla-mlir emit``, ``Lowered.as_text()``): only
  pxla-verify-handoff runs;
* the pxla form (``--stage pxla``, ``Lowered.pxla_text()``): its map
  kind's pipeline with default options runs first (the kind import named
  the module after, ``@xmap_...``; xmap's vectorize lowering when ``@main``
  is global; pmap's for a module of no kind); ``pipeline=`` runs another instead, e.g. the
  ``Lowered.pipeline`` it came with;
* StableHLO (``jax.jit(f).lower(x).as_text()``, with ``sdy`` or GSPMD
  shardings): pxla-handoff-pipeline{mode=partition} legalizes it; jax's
  per-device partition-mode StableHLO (no sharding anywhere) takes
  ``mode=replica``, as its collectives need either a manual region or
  replicas.

A replica-mode module whose ``@main`` records no layout (no
``pxla.tile_dims``) then gets pxla-add-device-axis: its values become the
devices' values stacked on a leading device axis.

Before anything reaches XLA the module is refused, with one line saying
why, when it is nested deeper than jaxlib's parser can take
(:mod:`pxla_mlir.mlir.core.nesting_depth`), asks for replicas and partitions both above
one (jaxlib compiles it, then aborts the process), calls back to Python
(a module in text carries no callables), has a boundary that is not a
tensor of static shape and known element type, or a boundary
``mhlo.sharding`` that tiles another number of devices than the module has.
"""

from __future__ import annotations

import os
import re

from jaxlib.mlir import ir

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.core import ir_utils, pxla_attrs, shardy
from pxla_mlir.mlir.core.diagnostics import DiagnosticCollector, source_excerpt
from pxla_mlir.mlir.core.nesting_depth import NestingError, check_nesting
from pxla_mlir.mlir.core.pxla_attrs import TILE_DIMS
from pxla_mlir.mlir.pass_infra import Pipeline, PipelineFailure, PipelineSyntaxError, run_pipeline
from pxla_mlir.mlir.pipelines import HandoffPipeline, PmapPipeline, XmapPipeline
from pxla_mlir.mlir.sharding import hlo_sharding

__all__ = ["ModuleError", "ELEMENT_TYPES", "read", "parse", "prepare", "check", "records_layout"]


class ModuleError(PxlaUserError, ValueError):
    """A module that cannot be loaded, compiled or run: what, where, how to fix (one line).
    ``diagnostic``: for text that does not parse, the error as pxla-opt prints it, with the
    source line and a caret under the column (the command line prints that instead)."""

    def __init__(self, message: str, diagnostic: str | None = None):
        super().__init__(message)
        self.diagnostic = diagnostic


#: MLIR element types a module's boundary may have, as numpy/jax dtype names.
ELEMENT_TYPES = {
    "i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "ui8": "uint8", "ui16": "uint16", "ui32": "uint32", "ui64": "uint64",
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "complex<f32>": "complex64", "complex<f64>": "complex128",
    "f8E4M3FN": "float8_e4m3fn", "f8E4M3FNUZ": "float8_e4m3fnuz", "f8E4M3B11FNUZ": "float8_e4m3b11fnuz",
    "f8E5M2": "float8_e5m2", "f8E5M2FNUZ": "float8_e5m2fnuz", "f8E4M3": "float8_e4m3", "f8E3M4": "float8_e3m4",
    "f8E8M0FNU": "float8_e8m0fnu", "f4E2M1FN": "float4_e2m1fn",
}
_CALLBACK = re.compile(r"xla_ffi(_partitioned)?_python_\w+_callback|xla_python_\w+_callback")
_GSPMD_TARGETS = {"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"}


def read(source) -> tuple[bytes, str]:
    if isinstance(source, bytes):
        return source, "<module>"
    text = os.fspath(source)
    if isinstance(source, str) and ("\n" in text or "{" in text):
        return text.encode("utf-8"), "<module>"
    try:
        with open(text, "rb") as f:
            return f.read(), text
    except OSError as e:
        raise ModuleError(f"cannot read {text!r}: {e.strerror}") from None


def _located(message: str, data: bytes, line: int, col: int) -> ModuleError:
    return ModuleError(message, "\n".join([message, *source_excerpt(data, line, col)]))


def parse(data: bytes, name: str, ctx: ir.Context) -> ir.Module:
    if data.lstrip().startswith(b"HloModule"):
        raise _located(f"{name}:1:1: error: this is XLA's HLO text, not an MLIR module; give the module as MLIR "
                       f"(jax: .lower(...).as_text(), not as_text(dialect=\"hlo\"); pxla-mlir emit --stage mhlo)",
                       data, 1, 1)
    try:
        check_nesting(data)
    except NestingError as e:
        raise _located(f"{name}:{e.line}:{e.col}: error: {e.message}", data, e.line, e.col) from None
    with ctx, DiagnosticCollector(ctx) as diags:
        try:
            return ir.Module.parse(data)
        except ir.MLIRError as e:
            diags.add_error(e)
    if not diags.errors:
        raise ModuleError(f"{name}: error: cannot parse the module")
    shown = diags.errors[0].format(name, data)
    raise ModuleError(shown.splitlines()[0], shown)


# -- from whatever form to the module XLA gets -----------------------------------------------

def prepare(module: ir.Module, name: str, pipeline: str | None = None) -> tuple[str, bool]:
    """Runs the pipelines the module needs (``pipeline`` first, if given);
    returns what ran as one pipeline (``pxla-opt --pass-pipeline`` on the
    text read replays it, where the text states ``mhlo.num_replicas`` and
    ``mhlo.num_partitions``: XLA's default 1 is written where it does not)
    and whether the values were stacked on a new device axis."""
    ran = []
    op = module.operation
    if pipeline is not None:
        ran.append(_run(module, name, pipeline))
    elif _is_pxla_form(op):
        ran.append(_run(module, name, _map_pipeline(op)))
    for attr in (pxla_attrs.NUM_REPLICAS, pxla_attrs.NUM_PARTITIONS):  # XLA's defaults, written for the checks
        if attr not in op.attributes:
            ir_utils.set_i32_attr(op, attr, 1)
    if _needs_legalizing(op) or _is_per_device_partition(op):
        mode = "replica" if _is_per_device_partition(op) else "partition"
        ran.append(_run(module, name, str(HandoffPipeline(mode=mode)).strip()))
    else:
        ran.append(_run(module, name, "pxla-verify-handoff"))
    replicas, partitions = pxla_attrs.device_counts(op)
    main = ir_utils.find_function(op, "main")
    stacked = main is not None and replicas > 1 and partitions == 1 and not records_layout(main)
    if stacked:
        ran.append(_run(module, name, "pxla-add-device-axis"))
    return _joined(ran), stacked


def _run(module: ir.Module, name: str, text: str) -> str:
    inner = text.strip()
    if inner.startswith("builtin.module(") and inner.endswith(")"):
        inner = inner[len("builtin.module("):-1]
    try:
        run_pipeline(module, Pipeline.parse(f"builtin.module({inner})", module.context), reproducer=False)
    except PipelineSyntaxError as e:
        raise ModuleError(f"bad pipeline {text.strip()!r}: {e.message}") from None
    except PipelineFailure as e:
        first = e.diagnostics[0].format(name).splitlines()[0] if e.diagnostics else f"{name}: error: {inner} failed"
        raise ModuleError(first) from None
    return inner


def _joined(steps: list[str]) -> str:
    return f"builtin.module({','.join(s for s in steps if s)})"


def _is_pxla_form(op: ir.Operation) -> bool:
    """What import writes and the map pipelines consume: placeholders, global
    ``pxla.dims`` / ``pxla.sharding_spec``, or per-device tiles in partition mode."""
    _, partitions = pxla_attrs.device_counts(op)
    for inner in ir_utils.walk(op):
        target = pxla_attrs.any_custom_call_target(inner)  # a placeholder (stablehlo before legalization, or mhlo)
        if target is not None and pxla_attrs.is_pxla_name(target):
            return True
        if inner.name == "func.func":
            for key in ("arg_attrs", "res_attrs"):
                for entries in pxla_attrs.boundary_attrs(inner, key):
                    if pxla_attrs.DIMS in entries or pxla_attrs.SHARDING_SPEC in entries:
                        return True
                    if TILE_DIMS in entries and partitions > 1:
                        return True
    return False


#: The pipeline of each map kind, by the kind import names a module after (``@xmap_f``, ``@pmap_step``,
#: ``@jit_step``: a pxla_mlir.jit body of pmaps); a module of no kind here gets pmap's.
_KIND_PIPELINES = {"pmap": PmapPipeline, "jit": PmapPipeline, "xmap": XmapPipeline}


def _map_pipeline(op: ir.Operation) -> str:
    """The pipeline of the map kind that imported the module, with default
    options (:data:`_KIND_PIPELINES`); xmap's vectorize lowering when
    ``@main`` is global (``pxla.dims``)."""
    main = ir_utils.find_function(op, "main")
    entries = [] if main is None else [*pxla_attrs.boundary_attrs(main, "arg_attrs"),
                                       *pxla_attrs.boundary_attrs(main, "res_attrs")]
    if any(pxla_attrs.DIMS in e or pxla_attrs.SHARDING_SPEC in e for e in entries):
        return str(XmapPipeline(lowering="vectorize"))
    kind = (ir_utils.symbol_name(op) or "").partition("_")[0]
    return str(_KIND_PIPELINES.get(kind, PmapPipeline)())


def _needs_legalizing(op: ir.Operation) -> bool:
    return any(o.name.startswith(("stablehlo.", "chlo.")) for o in ir_utils.walk(op))


def _is_per_device_partition(op: ir.Operation) -> bool:
    """Partition mode with no sharding anywhere: one device's program (jax's
    per-device StableHLO), which XLA's partitioner cannot run outside a manual region."""
    _, partitions = pxla_attrs.device_counts(op)
    if partitions == 1 or shardy.uses_shardy(op):
        return False
    for inner in ir_utils.walk(op):
        if pxla_attrs.SHARDING in inner.attributes or pxla_attrs.custom_call_target(inner) in _GSPMD_TARGETS:
            return False
        if inner.name == "func.func":
            for key in ("arg_attrs", "res_attrs"):
                if any(pxla_attrs.SHARDING in e for e in pxla_attrs.boundary_attrs(inner, key)):
                    return False
    return True


def records_layout(main: ir.Operation) -> bool:
    return any(TILE_DIMS in e for key in ("arg_attrs", "res_attrs") for e in pxla_attrs.boundary_attrs(main, key))


# -- checks before anything reaches XLA --------------------------------------------------------

def check(module: ir.Module, name: str) -> ir.Operation:
    op = module.operation
    main = ir_utils.find_function(op, "main")
    if main is None:
        raise ModuleError(f"{name}: the module has no func.func @main; XLA runs @main")
    replicas, partitions = pxla_attrs.device_counts(op)
    if replicas > 1 and partitions > 1:  # jaxlib compiles such a module, then aborts in IFRT
        raise ModuleError(f"{name}: the module asks for {replicas} replicas x {partitions} partitions; jaxlib runs "
                          f"one or the other (set mhlo.num_replicas or mhlo.num_partitions to 1)")
    for inner in ir_utils.walk(op):
        target = pxla_attrs.custom_call_target(inner)
        if target is not None and _CALLBACK.fullmatch(target):
            raise ModuleError(f"{name}: the module calls back to Python (custom call @{target}); a module read from "
                              f"text has no Python callables to call: run the map it came from instead")
    ftype = pxla_attrs.function_type(main)
    for what, types, key in (("argument", ftype.inputs, "arg_attrs"), ("result", ftype.results, "res_attrs")):
        for i, (t, entries) in enumerate(zip(types, pxla_attrs.boundary_attrs(main, key))):
            _check_type(t, f"{name}: @main's {what} {i}")
            if pxla_attrs.SHARDING in entries:
                _check_sharding(entries[pxla_attrs.SHARDING], partitions, f"{name}: @main's {what} {i}")
    return main


def _check_type(t: ir.Type, what: str) -> None:
    if not isinstance(t, ir.RankedTensorType) or not ir.RankedTensorType(t).has_static_shape:
        raise ModuleError(f"{what} is {t}; only tensors of static shape can be placed on the devices")
    if str(ir.RankedTensorType(t).element_type) not in ELEMENT_TYPES:
        raise ModuleError(f"{what} has element type {ir.RankedTensorType(t).element_type}; supported: "
                          f"{', '.join(ELEMENT_TYPES)}")


def _check_sharding(attr: ir.Attribute, partitions: int, what: str) -> None:
    """A boundary sharding over another device count: XLA refuses it in many
    lines (and jaxlib aborts the process when the module has replicas too)."""
    text = pxla_attrs.string_value(attr, pxla_attrs.SHARDING, None) if isinstance(attr, ir.StringAttr) else None
    try:
        sharding = hlo_sharding.parse(text) if text is not None else None
    except ValueError:
        sharding = None
    if sharding is None:
        raise ModuleError(f"{what} has mhlo.sharding {attr}, which pxla_mlir cannot read; write an HLO sharding "
                          f"like \"{{devices=[2,4]<=[8]}}\" or \"{{replicated}}\"")
    if sharding.num_devices is not None and sharding.num_devices > partitions or \
            sharding.kind == "tiled" and sharding.num_devices != partitions:
        raise ModuleError(f"{what} has mhlo.sharding {text}, which spans {sharding.num_devices} devices, but the "
                          f"module runs on {partitions} (mhlo.num_partitions)")
