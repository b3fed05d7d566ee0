"""The explore page's model: everything the page shows, as plain data.

:func:`build_page` takes a ``Lowered`` (pmap, xmap or jit) and gathers

* the stages in order: the jaxpr, the pxla form from import, the module
  after every elementary pass of the pipeline (replayed one pass at a time
  on the imported text, each pass timed, with a line diff against the
  previous stage, see :mod:`.linediff`), the final MHLO and XLA's optimized
  HLO (with the compile time);
* every collective of the final module: op, dtype, shapes, its groups as
  device indices and the bytes each device sends per call (formulas in
  :mod:`.traffic`), and XLA's cost analysis of the compiled program;
* the device mesh (``pxla.mesh``; a pmap's inner-replica axis is named after
  the nested pmap's axis when that is unambiguous) and the sharding of each
  argument and result of ``@main`` as the pxla form declares it
  (``pxla.dims`` / ``pxla.tile_dims``), plus xmap's named axes.

:func:`compare` aligns two pages stage by stage, with the normalised MLIR
diff (:mod:`pxla_mlir.mlir.core.mlir_diff`) of each pair. Nothing here imports jax;
the renderer (:mod:`.render`) turns a page into HTML.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import time
from collections.abc import Sequence

from jaxlib.mlir import ir

from pxla_mlir.mlir.core import device_groups, pxla_attrs
from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.mlir.core.ir_utils import symbol_name, walk
from pxla_mlir.mlir.core.mlir_diff import DiffError, diff as mlir_diff
from pxla_mlir.mlir.explore import linediff, traffic
from pxla_mlir.mlir.pass_infra import Pipeline
from pxla_mlir.mlir.pass_infra.stepwise import run_stepwise
from pxla_mlir.mlir.sharding.show import shard_ranges

__all__ = ["Stage", "Collective", "MeshView", "ShardingView", "NamedAxis", "Page", "Row", "Comparison",
           "build_page", "compare"]

Range = tuple[tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class Stage:
    name: str  # "jaxpr", "pxla", a pass argument, "mhlo" or "xla"
    kind: str  # "jaxpr" | "import" | "pass" | "final" | "xla"
    lang: str  # "jaxpr" | "mlir" | "hlo": how to highlight the text
    text: str | None  # None: not available
    seconds: float | None = None  # wall time of the pass (or of XLA's compile)
    changed: bool | None = None  # passes: whether the printed module changed
    diff: tuple[tuple[str, str], ...] = ()  # passes: linediff.diff_ops against the previous stage
    note: str = ""  # why the text is missing, or what failed

    @property
    def added(self) -> int:
        return sum(op == "+" for op, _ in self.diff)

    @property
    def removed(self) -> int:
        return sum(op == "-" for op, _ in self.diff)


@dataclasses.dataclass(frozen=True)
class MeshView:
    names: tuple[str, ...]
    sizes: tuple[int, ...]

    @property
    def num_devices(self) -> int:
        return math.prod(self.sizes)

    def grid(self) -> list[list[int]]:
        """Device indices in 2-d: the last axis across, the others (row-major) down."""
        cols = self.sizes[-1] if self.sizes else 1
        n = self.num_devices
        return [list(range(r * cols, (r + 1) * cols)) for r in range(n // cols)]

    def coords(self, device: int) -> tuple[int, ...]:
        out = []
        for size in reversed(self.sizes):
            out.append(device % size)
            device //= size
        return tuple(reversed(out))


@dataclasses.dataclass(frozen=True)
class Collective:
    index: int
    op: str  # short name: "all_reduce", "all_gather", ...
    value: str  # the SSA name of its first result in the final MHLO
    dtype: str  # element type of the first operand, e.g. "f32"
    operand_shape: tuple[int, ...]
    result_shape: tuple[int, ...]
    mode: str  # GroupMode value: "cross-replica", "flattened-id", ...
    groups: tuple[tuple[int, ...], ...]  # device indices; (source, target) pairs for collective_permute
    operand_bytes: int  # all operands together
    result_bytes: int  # all results together
    bytes_sent: tuple[int, ...]  # per device, per call

    @property
    def group_sizes(self) -> tuple[int, ...]:
        return tuple(sorted({len(g) for g in self.groups}))


@dataclasses.dataclass(frozen=True)
class ShardingView:
    label: str  # "argument 0", "result 1"
    dtype: str
    shape: tuple[int, ...]  # global shape
    dims: tuple[tuple[str, ...], ...]  # mesh axes splitting each dimension, major first
    ranges: tuple[Range | None, ...]  # per device: (start, stop) per dimension


@dataclasses.dataclass(frozen=True)
class NamedAxis:
    name: str
    size: int
    resources: tuple[str, ...]  # mesh axes, major first; () = vectorized on each device
    devices: int
    tile: int


@dataclasses.dataclass(frozen=True)
class Page:
    title: str
    pipeline: str
    num_replicas: int
    num_partitions: int
    mesh: MeshView
    stages: tuple[Stage, ...]
    collectives: tuple[Collective, ...]
    cost: tuple[tuple[str, float], ...]  # XLA's cost analysis, sorted by key
    shardings: tuple[ShardingView, ...]
    named_axes: tuple[NamedAxis, ...]  # xmap only

    @property
    def num_devices(self) -> int:
        return self.num_replicas * self.num_partitions

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    @property
    def passes(self) -> tuple[Stage, ...]:
        return tuple(s for s in self.stages if s.kind == "pass")


# -- building ------------------------------------------------------------------------------------

def build_page(lowered, *, title: str | None = None, compile: bool = True) -> Page:
    """The page model of a ``Lowered`` (see the module docs). ``compile=False``
    leaves out XLA's HLO and cost analysis."""
    ctx = make_context()
    pxla_plain = lowered.pxla_text()
    jaxpr_text = lowered.jaxpr_text() if hasattr(lowered, "jaxpr_text") else None
    stages = [Stage("jaxpr", "jaxpr", "jaxpr", jaxpr_text, note="" if jaxpr_text else "(not available)"),
              Stage("pxla", "import", "mlir", pxla_plain)]
    stages += _replay(ctx, lowered.pxla_text(debug_info=True), pxla_plain, lowered.pipeline)
    final = lowered.as_text()
    stages.append(Stage("mhlo", "final", "mlir", final))
    cost: tuple = ()
    if compile:
        earlier = getattr(lowered, "_compiled", None) is not None  # then there is no compile time to show
        start = time.perf_counter()
        try:
            compiled = lowered.compile()
            seconds = None if earlier else time.perf_counter() - start
            xla, note = compiled.as_text(), ""
            cost = _cost(compiled.cost_analysis())
        except Exception as e:  # the page still shows every stage before XLA
            xla, seconds, note = None, None, f"(XLA failed: {type(e).__name__}: {e})"
        stages.append(Stage("xla", "xla", "hlo", xla, seconds=seconds, note=note))
    else:
        stages.append(Stage("xla", "xla", "hlo", None, note="(not compiled)"))
    with ctx:
        final_module = ir.Module.parse(final)
        pxla_module = ir.Module.parse(pxla_plain)
        num_replicas, num_partitions = pxla_attrs.device_counts(final_module.operation)
        mesh = _mesh(final_module, pxla_module, num_replicas * num_partitions)
        found = _collectives(final_module, num_replicas, num_partitions)
        shardings = _shardings(pxla_module)
    name = title or (symbol_name(final_module.operation) or "module")
    return Page(name, lowered.pipeline, num_replicas, num_partitions, mesh, tuple(stages), found, cost,
                shardings, _named_axes(lowered.plan))


def _replay(ctx, start_text: str, start_plain: str, pipeline_text: str) -> list[Stage]:
    """The pipeline one elementary pass at a time (pass_infra.stepwise)."""
    with ctx:
        module = ir.Module.parse(start_text)
    out: list[Stage] = []
    previous = [start_plain]

    def on_step(_index, name, module, seconds):
        text = module.operation.get_asm(enable_debug_info=False)
        changed = text != previous[0]
        ops = tuple(linediff.diff_ops(previous[0], text)) if changed else ()
        out.append(Stage(name, "pass", "mlir", text, seconds=seconds, changed=changed, diff=ops))
        previous[0] = text

    run_stepwise(module, Pipeline.parse(pipeline_text, ctx), on_step=on_step)
    return out


def _cost(analysis) -> tuple[tuple[str, float], ...]:
    if isinstance(analysis, (list, tuple)):  # older jaxlibs: one dict per program
        analysis = analysis[0] if analysis else {}
    return tuple(sorted((str(k), float(v)) for k, v in dict(analysis or {}).items()))


def _main(module: ir.Module):
    funcs = [op for op in module.body.operations if op.operation.name == "func.func"]
    for f in funcs:
        if symbol_name(f.operation) == "main":
            return f.operation
    return funcs[0].operation if funcs else None


def _mesh(final: ir.Module, pxla: ir.Module, num_devices: int) -> MeshView:
    mesh = pxla_attrs.declared_mesh(final.operation) or pxla_attrs.declared_mesh(pxla.operation)
    if mesh is not None and mesh.size == num_devices:
        names, sizes = _name_inner_replicas(pxla, list(mesh.axis_names), list(mesh.axis_sizes))
        return MeshView(tuple(names), tuple(sizes))
    return MeshView(("devices",), (num_devices,))


def _name_inner_replicas(pxla: ir.Module, names: list[str], sizes: list[int]):
    """Replace a pmap's inner-replica axis by the nested pmaps' axes when
    their sizes and strides tile it exactly (one level or several)."""
    if pxla_attrs.REP_AXIS not in names:
        return names, sizes
    k = names.index(pxla_attrs.REP_AXIS)
    axes = set()
    for op in walk(pxla.operation):
        if op.name in pxla_attrs.CUSTOM_CALLS and pxla_attrs.AXIS_NAME in op.attributes:
            axes.add((pxla_attrs.read_str(op, pxla_attrs.AXIS_NAME), pxla_attrs.read_int(op, pxla_attrs.AXIS_SIZE, 0),
                      pxla_attrs.read_int(op, pxla_attrs.STRIDE, 0)))
    ordered = sorted(axes, key=lambda a: -a[2])
    stride, ok = 1, len({a[0] for a in ordered}) == len(ordered) and bool(ordered)
    for _name, size, st in reversed(ordered):
        ok = ok and st == stride and size > 0
        stride *= max(size, 1)
    if not ok or stride != sizes[k] or any(a[0] in names for a in ordered):
        return names, sizes
    return names[:k] + [a[0] for a in ordered] + names[k + 1:], sizes[:k] + [a[1] for a in ordered] + sizes[k + 1:]


def _tensor(value) -> tuple[tuple[int, ...], str]:
    t = ir.RankedTensorType(value.type)
    return tuple(t.shape), str(t.element_type)


def _collectives(module: ir.Module, num_replicas: int, num_partitions: int) -> tuple[Collective, ...]:
    out = []
    n = num_replicas * num_partitions
    for op in walk(module.operation):
        if op.name not in device_groups.MHLO_COLLECTIVES:
            continue
        mode = device_groups.group_mode(op).value
        groups = device_groups.op_device_groups(op, num_replicas, num_partitions)
        operands = [_tensor(v) for v in op.operands]
        results = [_tensor(v) for v in op.results]
        operand_bytes = sum(traffic.tensor_bytes(s, t) for s, t in operands)
        result_bytes = sum(traffic.tensor_bytes(s, t) for s, t in results)
        short = op.name.split(".", 1)[1]
        sent = traffic.bytes_sent(short, groups, operand_bytes, result_bytes, n)
        out.append(Collective(len(out), short, op.results[0].get_name(), operands[0][1], operands[0][0],
                              results[0][0], mode, tuple(tuple(g) for g in groups), operand_bytes, result_bytes,
                              sent))
    return tuple(out)


def _dims(attr) -> tuple[tuple[str, ...], ...]:
    dims: list[tuple[str, ...]] = []
    for entry in ir.ArrayAttr(attr):
        if isinstance(entry, ir.StringAttr):  # "?": unspecified, drawn as not split
            dims.append(())
        else:
            dims.append(tuple(ir.StringAttr(a).value for a in ir.ArrayAttr(entry)))
    return tuple(dims)


def _shardings(pxla: ir.Module) -> tuple[ShardingView, ...]:
    """Global shapes and pieces of @main's arguments and results in the pxla form."""
    from pxla_mlir.mlir.sharding.mesh import mapping_from_dims

    main = _main(pxla)
    if main is None:
        return ()
    amesh = pxla_attrs.declared_mesh(pxla.operation)
    declared = dict(amesh.shape) if amesh is not None else {}
    # A partitioned pmap's per-index tiles are whole along its automatic axes.
    manual = set(pxla_attrs.manual_axes(pxla.operation, amesh)) if amesh is not None else set()
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    out = []
    for label, types, key in (("argument", ftype.inputs, "arg_attrs"), ("result", ftype.results, "res_attrs")):
        attrs = list(ir.ArrayAttr(main.attributes[key])) if key in main.attributes else [None] * len(types)
        for i, (t, a) in enumerate(zip(types, attrs)):
            d = ir.DictAttr(a) if a is not None else None
            which = next((k for k in (pxla_attrs.DIMS, pxla_attrs.TILE_DIMS) if d is not None and k in d), None)
            if which is None or d is None or amesh is None or not isinstance(t, ir.RankedTensorType):
                continue
            rt = ir.RankedTensorType(t)
            dims = _dims(d[which])
            shape = list(rt.shape)
            if which == pxla_attrs.TILE_DIMS:  # per-device tile: scale up to the global shape by its manual axes
                shape = [s * math.prod(declared[a] for a in axes if a in manual) for s, axes in zip(shape, dims)]
            spec = amesh.sharding_spec(len(shape), mapping_from_dims(dims))
            ranges = shard_ranges(shape, spec)
            out.append(ShardingView(f"{label} {i}", str(rt.element_type), tuple(shape), dims, tuple(ranges)))
    return tuple(out)


def _named_axes(plan) -> tuple[NamedAxis, ...]:
    if plan is None:
        return ()
    return tuple(NamedAxis(n, int(plan.sizes[n]), tuple(plan.resources[n]), plan.devices_of(n), plan.tile(n))
                 for n in plan.names)


# -- comparing ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    a: int | None  # index into Comparison.a.stages (None: no such stage on that side)
    b: int | None
    diff: str  # unified diff of the two stages, normalised for MLIR ("" when the same)


@dataclasses.dataclass(frozen=True)
class Comparison:
    a: Page
    b: Page
    a_label: str
    b_label: str
    rows: tuple[Row, ...]


def compare(a: Page, b: Page, a_label: str = "A", b_label: str = "B") -> Comparison:
    """Two pages aligned by stage name (passes that only one side runs get
    rows of their own; replaced runs of passes are paired in order)."""
    names_a, names_b = [s.name for s in a.stages], [s.name for s in b.stages]
    rows = []
    matcher = difflib.SequenceMatcher(None, names_a, names_b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        left, right = list(range(i1, i2)), list(range(j1, j2))
        pairs = zip(left, right) if tag == "equal" else _zip_longest(left, right)
        for i, j in pairs:
            sa = a.stages[i] if i is not None else None
            sb = b.stages[j] if j is not None else None
            either = sa if sa is not None else sb
            assert either is not None  # _zip_longest never pairs two gaps
            name = either.name if sa is None or sb is None or sa.name == sb.name else f"{sa.name} / {sb.name}"
            rows.append(Row(name, i, j, _stage_diff(sa, sb, a_label, b_label)))
    return Comparison(a, b, a_label, b_label, tuple(rows))


def _zip_longest(left: Sequence[int], right: Sequence[int]):
    n = max(len(left), len(right))
    return [(left[k] if k < len(left) else None, right[k] if k < len(right) else None) for k in range(n)]


def _stage_diff(sa: Stage | None, sb: Stage | None, a_label: str, b_label: str) -> str:
    ta = sa.text if sa is not None and sa.text is not None else ""
    tb = sb.text if sb is not None and sb.text is not None else ""
    if sa is not None and sb is not None and sa.lang == sb.lang == "mlir" and ta and tb:
        try:
            return mlir_diff(ta, tb, a_name=a_label, b_name=b_label)
        except DiffError:
            pass
    lines = list(difflib.unified_diff(ta.splitlines(), tb.splitlines(), a_label, b_label, lineterm="", n=2))
    return "\n".join(lines) + ("\n" if lines else "")
