"""The stages of a map: ``Lowered`` (MHLO) and ``Compiled`` (an executable).

pmap, xmap and ``pxla_mlir.jit`` import a module in "pxla form" and call
:func:`lower` with it, its pipeline, its :class:`Layout` (devices, avals and
shardings of the flat inputs and outputs, donation, hoisted constants) and
its :class:`Signature` (how arguments flatten, how outputs unflatten).
``lower`` runs the pass pipeline (saving a reproducer when it fails) and
returns the ``Lowered``: a thin stage over its :class:`Lowering`, which
holds the results and does the work, as jax's ``Lowered`` over its
``Lowering``. ``Lowering.compile()`` hands the module to XLA and wraps the
executable for launches; ``Compiled`` wraps that for calls.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import jax
import numpy as np
from jax import dtypes, tree_util
from jax.experimental.layout import Format, Layout as XlaLayout
from jax.sharding import Sharding
from jax.stages import ArgInfo
from jaxlib.mlir import ir

from pxla_mlir.distributed.program_check import check_before_launch
from pxla_mlir.errors import PxlaUserError
from pxla_mlir.jaxbridge.jax_internals import core, hlo_cost_analysis, hlo_text, pytree_equality_errors
from pxla_mlir.jaxbridge.stablehlo_lowering import LOWERING_LOCK
from pxla_mlir.mlir.ir.pxla_attrs import device_counts
from pxla_mlir.mlir.pass_infra import Pipeline, PipelineFailure, run_pipeline
from pxla_mlir.mlir.pass_infra.pipeline import save_reproducer
from pxla_mlir.mlir.pipelines import to_stablehlo
from pxla_mlir.mlir.support.stats import STATS, timed
from pxla_mlir.runtime.callbacks import GuardedCallbacks, callback_results
from pxla_mlir.runtime.compile import compile_program, to_xla_computation
from pxla_mlir.runtime.debug_flags import compiling, dump_stage
from pxla_mlir.runtime.executable import ShardedExecutable, device_shapes, map_description

if TYPE_CHECKING:
    from jax.core import ShapedArray

    from pxla_mlir.runtime.executable import Device

__all__ = ["Signature", "Layout", "lower", "Lowering", "Lowered", "Compiled", "ArgumentTypeError", "narrowed_without_x64",
           "X64_FIX"]

#: How to pass 64-bit values (jax narrows them to 32 bits while its 64-bit types are off).
X64_FIX = ("set JAX_ENABLE_X64=1 in the environment (or call jax.config.update('jax_enable_x64', True) before "
           "using jax)")


class ArgumentTypeError(PxlaUserError, TypeError):
    """A call's arguments have other shapes or dtypes than compiled for (jax's ``TypeError``)."""


def narrowed_without_x64(dtype) -> bool:
    """True when jax, as configured now (64-bit types off), would turn a value
    of ``dtype`` (int64, float64, ...) into its 32-bit kind before a call."""
    return dtypes.canonicalize_dtype(dtype) != np.dtype(dtype)


@dataclasses.dataclass(frozen=True)
class Signature:
    """How a call's arguments become the flat inputs, and flat outputs a pytree.

    ``in_tree`` is the pytree of the dynamic positional arguments (those not
    in ``static_args``, (argnum, value) pairs), ``kwargs_tree`` that of the
    keyword arguments (None: no keyword arguments).
    """

    in_tree: Any  # PyTreeDefs, which jaxlib ships no stubs for
    out_tree: Any
    static_args: tuple[tuple[int, Any], ...] = ()
    kwargs_tree: Any = None

    @classmethod
    def flat(cls, n_in: int, n_out: int) -> Signature:
        """Flat leaves in, a list of leaves out."""
        return cls(tree_util.tree_structure((0,) * n_in), tree_util.tree_structure([0] * n_out))

    @property
    def args_tree(self):
        """The pytree of (positional arguments, keyword arguments), as jax's ``in_tree``."""
        return tree_util.treedef_tuple([self.in_tree, self.kwargs_tree or tree_util.tree_structure({})])

    def flatten(self, args: Sequence, kwargs: dict | None = None) -> list:
        """Flat leaves of a call. Static arguments may be left out (as jax's
        ``Compiled`` expects) or passed with the values compiled for."""
        args = tuple(args)
        if self.static_args and len(args) == len(self.in_tree.children()) + len(self.static_args):
            for i, value in self.static_args:
                if not _same(args[i], value):
                    raise TypeError(f"compiled for static argument {i} = {value!r}, called with {args[i]!r}; "
                                    f"lower and compile again for other static values")
            static = {i for i, _ in self.static_args}
            args = tuple(a for i, a in enumerate(args) if i not in static)
        leaves, tree = tree_util.tree_flatten((args, dict(kwargs or {})))
        if tree != self.args_tree:
            raise TypeError(pytree_mismatch(tree, self.args_tree))
        return leaves

    def unflatten(self, outs: Sequence):
        return tree_util.tree_unflatten(self.out_tree, outs)


def _same(a, b) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # an == that does not give a bool
        return False


def pytree_mismatch(got, expected) -> str:
    """jax's message for a call whose arguments are another pytree."""
    errors = list(pytree_equality_errors(got, expected))
    lines = [f"Function compiled with input pytree does not match the input pytree it was called with. There "
             f"are {len(errors)} mismatches, including:"]
    for path, now, seen, why in errors:
        head, *rest = path
        lines.append(f"    * at {('args', 'kwargs')[head.idx]}{tree_util.keystr(tuple(rest))}, seen {seen} but now "
                     f"given {now}, so {why}")
    return "\n".join(lines)


def check_avals(expected: Sequence, leaves: Sequence, args_tree) -> None:
    """jax's TypeError for arguments of other shapes or dtypes than compiled
    for: jax's words (a flat argument is ``'flat_args[i]'``, as jax.pmap names
    it), then where it is in the call's pytree."""
    errors, narrowed = [], []
    for i, (want, x) in enumerate(zip(expected, leaves)):
        got = core.shaped_abstractify(x)
        if (got.shape, got.dtype) != (want.shape, want.dtype):
            errors.append(f"Argument 'flat_args[{i}]' compiled with {want.str_short()} and called with "
                          f"{got.str_short()} (it is {_arg_path(args_tree, i)} of the call)")
            if got.shape == want.shape and narrowed_without_x64(want.dtype) and \
                    dtypes.canonicalize_dtype(want.dtype) == got.dtype:
                narrowed.append(f"{want.dtype.name} into {got.dtype.name}")
    if errors:
        count = f"The first 5 of {len(errors)}" if len(errors) >= 5 else "The"
        fix = ""
        if narrowed:
            fix = (f"\njax's 64-bit types are off (jax_enable_x64), so jax turns {', '.join(sorted(set(narrowed)))} "
                   f"before the call; to pass 64-bit values, {X64_FIX}")
        raise ArgumentTypeError("Argument types differ from the types for which this computation was compiled. "
                                "Perhaps you are calling the compiled executable with a different enable_x64 mode "
                                f"than when it was AOT compiled? {count} mismatches are:\n" + "\n".join(errors[:5])
                                + fix)


def _arg_path(args_tree, index: int) -> str:
    """``args[0]['w']`` / ``kwargs['y']``: where flat argument ``index`` is."""
    path, _ = tree_util.tree_flatten_with_path(args_tree.unflatten(range(args_tree.num_leaves)))[0][index]
    return ("args", "kwargs")[path[0].idx] + tree_util.keystr(tuple(path[1:]))


class _ArgumentTrees:
    """jax's ``in_tree``/``out_tree``/``args_info``/``in_avals``/``out_info``,
    shared by Lowered and Compiled (both hold ``signature``, ``consts``,
    ``_inputs()``: the flat input avals and donation flags, hoisted constants
    first, and ``_outputs()``: the flat output avals and shardings)."""

    signature: Signature

    @property
    def consts(self) -> Sequence:
        raise NotImplementedError

    def _inputs(self) -> tuple[Sequence, Sequence[bool]]:
        raise NotImplementedError

    def _outputs(self) -> tuple[Sequence, Sequence]:
        raise NotImplementedError

    @property
    def in_tree(self):
        """The pytree of (positional arguments, keyword arguments)."""
        return self.signature.args_tree

    @property
    def out_tree(self):
        return self.signature.out_tree

    @property
    def args_info(self):
        """The (args, kwargs) pytree of ``jax.stages.ArgInfo`` (``shape``, ``dtype``, ``donated``)."""
        avals, donated = self._inputs()
        n = len(self.consts)
        return self.in_tree.unflatten([ArgInfo(av, d) for av, d in zip(avals[n:], donated[n:])])

    @property
    def in_avals(self):
        """The (args, kwargs) pytree of the arguments' avals, as jax's stages
        give it (``layout.in_avals``: the flat ones, hoisted constants first)."""
        avals, _ = self._inputs()
        return self.in_tree.unflatten(list(avals[len(self.consts):]))

    @property
    def out_info(self):
        """The outputs' pytree of ``jax.ShapeDtypeStruct`` (shape, dtype, sharding)."""
        avals, shardings = self._outputs()
        return self.out_tree.unflatten([
            jax.ShapeDtypeStruct(av.shape, av.dtype, sharding=s if isinstance(s, jax.sharding.Sharding) else None)
            for av, s in zip(avals, shardings)])


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where a lowered map's flat inputs and outputs live.

    ``consts`` are values hoisted out of the body: the first flat inputs,
    supplied by ``Compiled`` itself (``in_avals``/``in_shardings``/``donated``
    include them). ``donated`` flags the inputs whose buffers the executable
    consumes.
    """

    # Sequences in, tuples stored (__post_init__).
    devices: Sequence[Device]
    in_avals: Sequence[ShapedArray]
    out_avals: Sequence[ShapedArray]
    in_shardings: Sequence[Sharding | None]  # None: XLA's choice (a module read from text, before compiling)
    out_shardings: Sequence[Sharding | None]
    donated: Sequence[bool] = ()
    consts: Sequence = ()  # the hoisted constants' values

    def __post_init__(self):
        for name in ("devices", "in_avals", "out_avals", "in_shardings", "out_shardings", "consts"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "donated", tuple(self.donated) or (False,) * len(self.in_avals))


def lower(imported, *, pipeline: str, layout: Layout, signature: Signature,
          jaxpr_text: Callable[[], str] | None = None, plan: Any = None) -> Lowered:
    """Runs ``pipeline`` on an imported module (:class:`pxla_mlir.maps.importing.Imported`:
    the pxla form, jax's keepalive, the host callbacks) and returns its ``Lowered``.

    A failing pipeline raises ``PipelineFailure`` with a reproducer: the
    imported module saved for ``pxla-opt`` (see ``pass_infra.reproducer``).
    """
    STATS["lowerings"] += 1
    module = imported.module
    pxla = module.operation.clone()  # printed only if asked for
    dump_stage(pxla, "pxla")  # jax_dump_ir_to
    try:
        with timed("passes"), LOWERING_LOCK:  # the module may live in the shared lowering context
            run_pipeline(module, Pipeline.cached(pipeline, module.context), reproducer=False, verify_each=False)
    except PipelineFailure as e:
        # Printed only now: the copy made before the pipeline ran is what a rerun needs.
        saved = save_reproducer(pxla.get_asm(enable_debug_info=True), e.pipeline, verify_each=False)
        raise PipelineFailure(e.pipeline, e.diagnostics, saved) from None
    lowering = Lowering(module, pxla, pipeline=pipeline, layout=layout, keepalive=imported.keepalive,
                        host_callbacks=imported.host_callbacks, jaxpr_text=jaxpr_text, plan=plan)
    return Lowered(lowering, signature)


class Lowering:
    """What a map lowered to, and the work of compiling it: the final module,
    the pxla form from import, the pipeline that ran between them, the
    :class:`Layout` of its flat inputs and outputs, jax's keepalive and the
    Python callables its host callbacks call (by index, handed to XLA at
    compile time). ``plan`` is an xmap's plan (named axes, sizes,
    resources); None for pmap. The stage objects wrap it (jax's ``Lowered``
    over its ``Lowering``)."""

    def __init__(self, module: ir.Module, pxla: ir.Operation, *, pipeline: str, layout: Layout,
                 keepalive: Any = None, host_callbacks: Sequence = (), jaxpr_text: Callable[[], str] | None = None,
                 plan: Any = None):
        self.module, self.pxla = module, pxla
        self.pipeline = pipeline
        self.layout = layout
        self.keepalive = keepalive
        self.host_callbacks = tuple(host_callbacks)
        self.jaxpr_text = jaxpr_text  # printed only if asked for
        self.plan = plan

    devices = property(lambda self: self.layout.devices)
    in_avals = property(lambda self: self.layout.in_avals)
    out_avals = property(lambda self: self.layout.out_avals)

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        if _dialect(dialect) == "hlo":
            return hlo_text(self.compiler_ir("hlo"), debug_info=debug_info)
        return cast(str, self.compiler_ir(dialect).operation.get_asm(enable_debug_info=debug_info))  # text, not bytes

    def compiler_ir(self, dialect: str | None = None):
        dialect = _dialect(dialect)
        if dialect == "mhlo":
            return self.module
        if dialect == "stablehlo":
            return to_stablehlo(self.module)
        return to_xla_computation(self.module)

    def mhlo(self) -> ir.Module:
        return self.module

    def compile(self, compiler_options: dict | None = None) -> ShardedExecutable:
        """The module compiled by XLA, wrapped for launches."""
        module, layout = self.module, self.layout
        what = map_description(module)
        callbacks = None
        if self.host_callbacks:  # none may raise into XLA (runtime/callbacks.py)
            with LOWERING_LOCK:
                callbacks = GuardedCallbacks(self.host_callbacks, callback_results(module), what)
        expected = (device_shapes(layout.in_avals, layout.in_shardings),
                    device_shapes(layout.out_avals, layout.out_shardings))
        # Closed-over arrays are arguments: closures over other values of their shapes lower to the same
        # program and share its executable, unless jax's keepalive or host callbacks tie it to this lowering.
        with timed("compile"):
            program = compile_program(module, layout.devices, compiler_options=compiler_options,
                                      host_callbacks=callbacks.callables if callbacks else (), expected=expected,
                                      share=not (self.keepalive or callbacks),
                                      logged=lambda: compiling(module, layout.in_avals, layout.in_shardings))
        xla = program.xla
        in_shardings, out_shardings = self.executable_shardings(xla)
        placed = dataclasses.replace(layout, in_shardings=in_shardings, out_shardings=out_shardings)
        # Multi-process: every launch agrees on the program with the other processes (distributed/program_check.py).
        return ShardedExecutable(xla, placed, keepalive=(self.keepalive, callbacks, program), callbacks=callbacks,
                                 agreement=check_before_launch(self), what=what,
                                 replicas=device_counts(module.operation)[0] > 1)

    def executable_shardings(self, xla) -> tuple[Sequence, Sequence]:
        """How the executable's inputs and outputs are laid out: the layout's
        (a module read from text asks XLA, see :mod:`pxla_mlir.maps.text_modules`)."""
        return self.layout.in_shardings, self.layout.out_shardings


class Lowered(_ArgumentTrees, jax.stages.Lowered):
    """A map lowered to MHLO: its :class:`Lowering` (the modules, the
    :class:`Layout` of its flat inputs and outputs, the pipeline) and its
    call signature. Made by :func:`lower`.

    jax's AOT API (a ``jax.stages.Lowered``): ``as_text(dialect=)``,
    ``compiler_ir(dialect=)``, ``cost_analysis()``, ``args_info``,
    ``in_avals``, ``out_info``, ``in_tree``/``out_tree``,
    ``compile(compiler_options=)``; ``layout`` holds the flat avals and
    shardings, hoisted constants first.
    """

    _no_kwargs = False  # jax.stages.Lowered's field, read by jax code: calls take keyword arguments
    # jax's (pytree, flat avals) of the arguments (hoisted constants left out) and of the results; jax declares
    # them as fields of another shape, which only its own Lowered.compile reads (overridden here).
    _in_types = property(lambda self: (self.in_tree, list(self.layout.in_avals[len(self.consts):])))  # pyright: ignore[reportAssignmentType]
    _out_types = property(lambda self: (self.out_tree, list(self.layout.out_avals)))  # pyright: ignore[reportAssignmentType]
    _lowering: Lowering  # ours, not jax's: every method of jax's Lowered that reads it is overridden here

    def __init__(self, lowering: Lowering, signature: Signature):
        self._lowering = lowering
        self.signature = signature
        self._compiled: Compiled | None = None

    # The lowering's parts, as the rest of the AOT API and jax's Lowered name them.
    pipeline = property(lambda self: self._lowering.pipeline)
    layout = property(lambda self: self._lowering.layout)
    host_callbacks = property(lambda self: self._lowering.host_callbacks)
    plan = property(lambda self: self._lowering.plan)
    devices = property(lambda self: self.layout.devices)
    in_shardings = property(lambda self: self.layout.in_shardings)
    out_shardings = property(lambda self: self.layout.out_shardings)
    donated = property(lambda self: self.layout.donated)
    consts = property(lambda self: self.layout.consts)

    def _outputs(self):
        return self.layout.out_avals, self.layout.out_shardings

    def as_text(self, dialect: str | None = None, *, debug_info: bool = False) -> str:
        """The final module as text: MHLO (``dialect`` None or "mhlo";
        deterministic, no locations unless ``debug_info``), "stablehlo", or
        XLA's "hlo" (before XLA's optimizations; ``Compiled.as_text()`` gives
        the optimized HLO)."""
        return self._lowering.as_text(dialect, debug_info=debug_info)

    def compiler_ir(self, dialect: str | None = None):
        """The final module: an ``ir.Module`` for "mhlo" (the default; the
        module itself) and "stablehlo" (a converted copy), XLA's
        ``XlaComputation`` for "hlo"."""
        return self._lowering.compiler_ir(dialect)

    def cost_analysis(self) -> dict:
        """XLA's cost estimate of the module before optimization (``Compiled.cost_analysis()``: after)."""
        return hlo_cost_analysis(self.devices[0].platform, self.compiler_ir("hlo"))

    def _inputs(self):
        return self.layout.in_avals, self.donated

    def pxla_text(self, *, debug_info: bool = False) -> str:
        """The imported pxla form, before the pipeline ran."""
        return cast(str, self._lowering.pxla.get_asm(enable_debug_info=debug_info))

    def jaxpr_text(self) -> str | None:
        """The traced jaxpr, when the map recorded it."""
        text = self._lowering.jaxpr_text
        return text() if text is not None else None

    def mhlo(self) -> ir.Module:
        return self._lowering.module

    def explore(self, path: str | None = None, **options) -> str:
        """Writes the explore page (every stage, collectives, shardings) to
        ``path`` and returns the path; with no path, returns the HTML."""
        from pxla_mlir.mlir.explore import explore_html

        html = explore_html(self, **options)
        if path is None:
            return html
        with open(path, "w", encoding="utf-8") as f:
            f.write(html)
        return path

    def _repr_html_(self) -> str:
        from pxla_mlir.mlir.explore import notebook_html

        return notebook_html(self)

    def compile(self, compiler_options: dict | None = None, *, device_assignment: Sequence | None = None) -> Compiled:
        """Compiles with XLA (once; with ``compiler_options``, XLA debug
        options by name such as ``{"xla_cpu_enable_fast_math": True}``, anew).
        ``device_assignment`` (jax's) may only name the devices it was lowered for, in their order."""
        if device_assignment is not None and tuple(device_assignment) != tuple(self.devices):
            raise ValueError(f"compile(device_assignment=...): this program was lowered for devices "
                             f"{[d.id for d in self.devices]} and runs on those only, got "
                             f"{[getattr(d, 'id', d) for d in device_assignment]}; leave device_assignment out, or "
                             f"lower the map for the other devices (pmap's devices=, pxla_mlir.jit's devices=, "
                             f"an xmap's mesh)")
        if compiler_options is None and self._compiled is not None:
            return self._compiled
        compiled = Compiled(self._lowering.compile(compiler_options), self.consts, self.signature)
        if compiler_options is None:
            self._compiled = compiled
        return compiled


_DIALECTS = ("mhlo", "stablehlo", "hlo")


def _dialect(dialect: str | None) -> str:
    if dialect is None:
        return "mhlo"
    if dialect not in _DIALECTS:
        raise ValueError(f"unknown dialect: {dialect!r}; use one of {', '.join(map(repr, _DIALECTS))} (or None "
                         f"for mhlo)")
    return dialect


class Compiled(_ArgumentTrees, jax.stages.Compiled):
    """A compiled map; call it with arguments like those it was lowered for
    (static arguments may be left out, as for jax's ``Compiled``).

    jax's AOT API (a ``jax.stages.Compiled``): ``as_text()``,
    ``cost_analysis()``, ``memory_analysis()``, ``runtime_executable()``,
    ``input_shardings``/``output_shardings``, ``input_formats``/``output_formats``,
    ``args_info``, ``in_avals``, ``out_info``, ``in_tree``/``out_tree``, ``call()``.
    """

    _no_kwargs = False  # jax.stages.Compiled's field: calls take keyword arguments
    consts = property(lambda self: self._hoisted)  # the hoisted constants, first of the flat inputs

    def __init__(self, executable: ShardedExecutable, consts: Sequence, signature: Signature):
        self.executable = executable
        self.signature = signature
        self._hoisted = tuple(consts)
        self._device_consts: list | None = None

    def __call__(self, *args, **kwargs):
        leaves = self.signature.flatten(args, kwargs)
        check_avals(self.executable.in_avals[len(self.consts):], leaves, self.in_tree)
        return self.signature.unflatten(self.call_flat(leaves))

    def call(self, *args, **kwargs):
        """Runs it, as calling it does (jax's ``Compiled.call``)."""
        return self(*args, **kwargs)

    def call_flat(self, leaves: Sequence) -> list:
        """Runs on flat dynamic inputs (without the hoisted constants)."""
        return self.executable([*self.consts, *leaves] if self.consts else leaves)

    def device_consts(self) -> list:
        """The hoisted constants placed on the devices once (for the C++ path)."""
        if self._device_consts is None:
            self._device_consts = [self.executable.place(c, i) for i, c in enumerate(self.consts)]
        return self._device_consts

    def as_text(self) -> str:
        """XLA's optimized HLO."""
        return self.executable.hlo_text()

    def cost_analysis(self):
        return self.executable.cost_analysis()

    def memory_analysis(self):
        """XLA's ``CompiledMemoryStats`` (argument, output, temp and code sizes in bytes)."""
        return self.executable.xla.get_compiled_memory_stats()

    def runtime_executable(self):
        """jaxlib's ``LoadedExecutable``."""
        return self.executable.xla

    def _inputs(self):
        return self.executable.in_avals, self.executable.donated

    def _outputs(self):
        return self.executable.out_avals, self.executable.out_shardings

    @property
    def input_shardings(self):
        """The (args, kwargs) pytree of the shardings the arguments are placed with."""
        return self.in_tree.unflatten(self.executable.in_shardings[len(self.consts):])

    @property
    def output_shardings(self):
        return self.out_tree.unflatten(self.executable.out_shardings)

    @property
    def input_formats(self):
        """The (args, kwargs) pytree of ``Format``: each argument's XLA layout and sharding, as jax's."""
        formats = _formats(self.executable.xla, "get_parameter_layouts", self.executable.in_shardings)
        return self.in_tree.unflatten(formats[len(self.consts):])

    @property
    def output_formats(self):
        """The outputs' pytree of ``Format`` (XLA layout and sharding), as jax's."""
        return self.out_tree.unflatten(_formats(self.executable.xla, "get_output_layouts",
                                                self.executable.out_shardings))

    @property
    def out_info(self):
        """The outputs' pytree of ``jax.ShapeDtypeStruct`` with their ``Format`` (layout and sharding), as jax's."""
        formats = jax.tree.leaves(self.output_formats, is_leaf=lambda f: isinstance(f, Format))
        return self.out_tree.unflatten([jax.ShapeDtypeStruct(av.shape, av.dtype, sharding=f)
                                        for av, f in zip(self.executable.out_avals, formats)])


def _formats(xla, which: str, shardings: Sequence) -> list:
    """``Format(layout, sharding)`` of each parameter or result, XLA's layouts read as jax reads them (none
    when XLA cannot tell, or where the sharding is XLA's to choose)."""
    try:
        layouts = [XlaLayout.from_pjrt_layout(layout) for layout in getattr(xla, which)()]
    except Exception:  # as jax: a runtime that cannot give its layouts gives none
        layouts = [None] * len(shardings)
    return [Format(layout, s) if isinstance(s, jax.sharding.Sharding) else Format()
            for layout, s in zip(layouts, shardings)]
