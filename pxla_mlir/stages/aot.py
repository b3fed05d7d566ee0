"""The stages of a program: ``Lowered`` (MHLO) and ``Compiled`` (an
executable), jax's AOT API as ``jax.stages`` objects over a
:class:`~pxla_mlir.stages.lowering.Lowering`, which holds the results and
does the work, as jax's ``Lowered`` over its ``Lowering``.
``Lowering.compile()`` hands the module to XLA and wraps the executable for
launches; ``Compiled`` wraps that for calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import jax
from jax.experimental.layout import Format, Layout as XlaLayout
from jax.stages import ArgInfo
from jaxlib.mlir import ir

from pxla_mlir.errors import entry_point
from pxla_mlir.jaxbridge.jax_internals import hlo_cost_analysis
from pxla_mlir.jaxbridge.tracebacks import api_boundary, filter_frames
from pxla_mlir.mlir.support.files import write_atomically
from pxla_mlir.runtime.executable import ShardedExecutable
from pxla_mlir.runtime.module_facts import ModuleToCompile
from pxla_mlir.stages.lowering import Layout, Lowering
from pxla_mlir.stages.signature import Signature, check_avals

__all__ = ["Lowered", "Compiled", "ArgumentTrees"]


class ArgumentTrees:
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
        """The pytree of the outputs."""
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


class Lowered(ArgumentTrees, jax.stages.Lowered):
    """A map lowered to MHLO: what ``f.lower(*args)`` of a pmap, xmap or
    ``pxla_mlir.jit`` gives, and [`pxla_mlir.load`][pxla_mlir.load] of a
    module from text. It holds the modules (the final MHLO, the pxla form),
    the pipeline that made one from the other, the layout of its flat inputs
    and outputs, and its call signature.

    jax's AOT API (a ``jax.stages.Lowered``): ``as_text(dialect=)``,
    ``compiler_ir(dialect=)``, ``cost_analysis()``, ``args_info``,
    ``in_avals``, ``out_info``, ``in_tree``/``out_tree``,
    ``compile(compiler_options=)`` (a [`Compiled`][pxla_mlir.Compiled]);
    ``layout`` holds the flat avals and shardings, hoisted constants first.
    """

    _no_kwargs = False  # jax.stages.Lowered's field, read by jax code: calls take keyword arguments
    # jax's (pytree, flat avals) of the arguments (hoisted constants left out) and of the results.
    # (jax declares them as fields of another shape, which only its own Lowered.compile reads: overridden here)
    _in_types = property(lambda self: (self.in_tree, list(self.layout.in_avals[len(self.consts):])))  # pyright: ignore[reportAssignmentType]
    _out_types = property(lambda self: (self.out_tree, list(self.layout.out_avals)))  # pyright: ignore[reportAssignmentType]
    # ours, not jax's (another type under jax's name): every method of jax's Lowered that reads it is overridden here
    _lowering: Lowering

    def __init__(self, lowering: Lowering, signature: Signature):
        self._lowering = lowering  # pyright: ignore[reportIncompatibleVariableOverride]
        self.signature = signature
        self._compiled: Compiled | None = None

    # The lowering's parts, as the rest of the AOT API and jax's Lowered name them.
    host_callbacks = property(lambda self: self._lowering.host_callbacks)
    plan = property(lambda self: self._lowering.plan)

    @property
    def consts(self) -> Sequence:
        """The hoisted constants, first of the flat inputs."""
        return self.layout.consts

    @property
    def pipeline(self) -> str:
        """The pass pipeline that made the final module from the pxla form (``pxla-opt -p`` takes it)."""
        return self._lowering.pipeline

    @property
    def layout(self) -> Layout:
        """The flat inputs and outputs: avals, shardings, donation, hoisted constants first."""
        return self._lowering.layout

    @property
    def devices(self) -> Sequence:
        """The devices the program runs on, in the order of its device ids."""
        return self.layout.devices

    @property
    def in_shardings(self) -> Sequence:
        """The flat inputs' shardings (None: XLA's choice, for a module read from text)."""
        return self.layout.in_shardings

    @property
    def out_shardings(self) -> Sequence:
        """The flat outputs' shardings."""
        return self.layout.out_shardings

    @property
    def donated(self) -> Sequence[bool]:
        """Whether each flat input is donated."""
        return self.layout.donated

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
        return cast(str, self._lowering.pxla.get_asm(enable_debug_info=debug_info))  # text, not bytes

    def jaxpr_text(self) -> str | None:
        """The traced jaxpr, when the map recorded it."""
        text = self._lowering.jaxpr_text
        return text() if text is not None else None

    def mhlo(self) -> ir.Module:
        """The final module (the lowering's own: clone it before changing it)."""
        self._lowering.to_compile().forget_text()  # it may be rewritten in place: the compile prints it anew
        return self._lowering.module

    def to_compile(self) -> ModuleToCompile:
        """The final module as compiling reads it: its facts (name, text digest, device counts) without
        parsing a lowering from the cache (``pxla_mlir.runtime.module_facts``)."""
        return self._lowering.to_compile()

    def explore(self, path: str | None = None, **options) -> str:
        """Writes the explore page (every stage, collectives, shardings) to
        ``path`` and returns the path; with no path, returns the HTML."""
        from pxla_mlir.mlir.explore import explore_html

        html = explore_html(self, **options)
        if path is None:
            return html
        write_atomically(path, html)
        return path

    def _repr_html_(self) -> str:
        from pxla_mlir.mlir.explore import notebook_html

        return notebook_html(self)

    @api_boundary
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


class Compiled(ArgumentTrees, jax.stages.Compiled):
    """A compiled map: what [`Lowered.compile()`][pxla_mlir.Lowered.compile]
    gives. Call it with arguments like those it was lowered for (static
    arguments may be left out, as for jax's ``Compiled``).

    jax's AOT API (a ``jax.stages.Compiled``): ``as_text()``,
    ``cost_analysis()``, ``memory_analysis()``, ``runtime_executable()``,
    ``input_shardings``/``output_shardings``, ``input_formats``/``output_formats``,
    ``args_info``, ``in_avals``, ``out_info``, ``in_tree``/``out_tree``, ``call()``.
    """

    _no_kwargs = False  # jax.stages.Compiled's field: calls take keyword arguments

    @property
    def consts(self) -> Sequence:
        """The hoisted constants, first of the flat inputs."""
        return self._hoisted

    def __init__(self, executable: ShardedExecutable, consts: Sequence, signature: Signature):
        self.executable = executable
        self.signature = signature
        self._hoisted = tuple(consts)
        self._device_consts: list | None = None

    @entry_point
    def __call__(self, *args, **kwargs):
        try:
            leaves = self.signature.flatten(args, kwargs)
            check_avals(self.executable.in_avals[len(self.consts):], leaves, self.in_tree)
            return self.signature.unflatten(self.call_flat(leaves))
        except Exception as e:  # an entry point: the user's frames only (a bare raise adds none)
            filter_frames(e)
            raise

    @api_boundary
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
        """XLA's cost estimate of the optimized program (flops, bytes accessed, ...)."""
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
        """The outputs' pytree of their shardings."""
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
