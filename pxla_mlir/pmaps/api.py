"""``pxla_mlir.pmap``: jax.pmap's interface on the pxla_mlir pipeline.

    f = pxla_mlir.pmap(fn, axis_name="i")
    f(x)                          # jax.Arrays laid out like jax.pmap's
    lowered = f.lower(x)          # .as_text(), .mhlo(), .pipeline, .compile()
    compiled = lowered.compile()  # __call__, .as_text() (XLA's HLO), .cost_analysis()

A call with concrete arguments takes the fast path: its signature (pytree,
avals, static arguments) finds a cached executable, so a repeated call does
no tracing, lowering or compiling (:class:`pxla_mlir.maps.function.MapFunction`),
also from a new ``pmap(f)`` object made with the same function and options
(the caches are shared and weakly keyed on the function, as jax.pmap's).
Called on tracers (inside an outer pmap, grad, vmap, ...), the pmap is bound
as the ``pxla_pmap`` primitive instead.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from jax import tree_util

from pxla_mlir.jaxbridge.jax_internals import api_util, core
from pxla_mlir.jaxbridge.tracebacks import api_boundary
from pxla_mlir.maps.arguments import argnums, check_backend, check_donation
from pxla_mlir.maps.function import MapFunction, Traced as _Traced
from pxla_mlir.maps.invariance import varying_outputs
from pxla_mlir.maps.tracing import trace_flat
from pxla_mlir.mlir.pass_infra.extra_passes import own_passes
from pxla_mlir.mlir.pass_infra.registry import REGISTRY
from pxla_mlir.mlir.pipelines import PmapPipeline, api_options, configure
from pxla_mlir.mlir.support.stats import timed
from pxla_mlir.mlir.support.suggest import did_you_mean
from pxla_mlir.pmaps import partitions as partitions_mod
from pxla_mlir.pmaps.arguments import (
    Call,
    PmapUsageError,
    check_axes_spec,
    check_axis_size,
    examine_call,
    flatten_out_axes,
)
from pxla_mlir.pmaps.lower import deoptimized, lower_traced
from pxla_mlir.pmaps.primitive import PmapParams, bind
from pxla_mlir.stages.aot import Lowered
from pxla_mlir.stages.devices import check_devices

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr
    from jax.sharding import PartitionSpec

__all__ = ["pmap", "PmapFunction", "unnamed_axis"]


def unnamed_axis() -> str:
    """The axis name of a pmap given none: jax.pmap's at the top level, and a
    fresh one inside maps (pmaps nest, and each level needs its own name).
    The same at the same depth, so it never tells one pmap object from another."""
    bound = set(core.get_axis_env().axis_sizes)
    if _UNNAMED not in bound:
        return _UNNAMED
    return next(f"_pxla_unnamed{k}" for k in range(1, len(bound) + 2) if f"_pxla_unnamed{k}" not in bound)


_UNNAMED = "_internal_pmap_axis_name"  # jax.pmap's name for an unnamed axis


@dataclasses.dataclass(frozen=True)
class Traced(_Traced):
    """A traced pmap body and how its outputs leave the devices."""

    jaxpr: ClosedJaxpr
    out_tree: Any
    out_axes: tuple[int | None, ...]
    name: str
    cacheable: bool = True  # False: it closes over an outer transformation's values
    in_specs: tuple[PartitionSpec | None, ...] | None = None  # partitioned body: a PartitionSpec or None per flat
    out_specs: tuple[PartitionSpec | None, ...] | None = None  # argument, and per flat output


def check_out_axes_none(traced: Traced, varying_in: list[bool], axis_name) -> None:
    if all(a is not None for a in traced.out_axes):
        return
    varies = varying_outputs(traced.jaxpr.jaxpr, varying_in, axis_name)
    paths = [tree_util.keystr(p) for p, _ in tree_util.tree_flatten_with_path(
        tree_util.tree_unflatten(traced.out_tree, [0] * traced.out_tree.num_leaves))[0]]
    for i, (a, v) in enumerate(zip(traced.out_axes, varies)):
        if a is None and v:
            raise PmapUsageError(
                f"output {paths[i] or i} of pmap {traced.name!r} has out_axes=None, but it may differ between "
                f"the devices of axis {axis_name!r} (it is computed from mapped inputs or the device index "
                f"without a reduction over {axis_name!r}). pxla_mlir returns one value for out_axes=None only "
                f"when it is provably the same on every device: reduce it first (lax.psum, lax.pmean, "
                f"lax.all_gather), or use out_axes=0 and pick the device you want")


class PmapFunction(MapFunction[Traced]):
    """The object ``pmap`` returns."""

    what = "pmap"

    def __init__(self, fun: Callable, axis_name, *, in_axes, out_axes, static_broadcasted_argnums, devices,
                 backend, axis_size, donate_argnums, options: PmapPipeline, partitions=None, in_partitions=None,
                 out_partitions=None, pieces: str = "on"):
        if not callable(fun):
            raise TypeError(f"pmap requires a callable to map, got {fun!r} of type {type(fun).__name__}")
        self._init = dict(in_axes=in_axes, out_axes=out_axes, static_broadcasted_argnums=static_broadcasted_argnums,
                          devices=devices, backend=backend, axis_size=axis_size, donate_argnums=donate_argnums,
                          partitions=partitions, in_partitions=in_partitions, out_partitions=out_partitions,
                          pieces=pieces)
        self.options = options
        self.pieces: Literal["on", "off"] = check_pieces(pieces)
        check_axes_spec(in_axes, "in_axes")
        check_axes_spec(out_axes, "out_axes")
        static = argnums(static_broadcasted_argnums, "pmap static_broadcasted_argnums")
        donate = argnums(donate_argnums, "pmap donate_argnums")
        check_donation(donate, static)
        self._axis_name = axis_name
        self.in_axes, self.out_axes = in_axes, out_axes
        self.devices = check_devices(devices)
        check_backend(self.devices, backend, "pmap")
        self.backend = backend
        self.axis_size = check_axis_size(axis_size)
        self.partitions = partitions_mod.make(partitions, in_partitions, out_partitions, axis_name=self.axis_name,
                                              mode=options.mode)
        shared = (axis_name, _axes_key(in_axes), _axes_key(out_axes), static, donate, self.devices, backend,
                  self.axis_size, options, self.partitions.key(), self.pieces)
        super().__init__(fun, static_argnums=static, donate_argnums=donate, options=shared)
        self._own_passes = own_passes(options)
        self._no_environment = not self.partitions.partitioning and not self._own_passes  # see _environment
        self._versioned_env: tuple | None = None

    @property
    def axis_name(self):
        """The mapped axis's name (for a pmap given none, the one it has where it is called)."""
        return self._axis_name if self._axis_name is not None else unnamed_axis()

    # -- the front end's hooks (see maps.function) ----------------------------------------------
    def _environment(self):
        # A partitioned body traced inside other pmaps names their axes in its mesh. With passes of its own,
        # the registry's generation: a pass registered again (another version) resolves and lowers anew.
        if not self._own_passes:
            return self.partitions.environment()
        env, last = (self.partitions.environment(), REGISTRY.generation), self._versioned_env
        # the same tuple while nothing changed: the cached call finds its dispatcher by identity
        if last is None or last != env:
            self._versioned_env = last = env
        return last

    def _examine(self, args, kwargs) -> Call:
        return examine_call(args, kwargs, in_axes=self.in_axes, static_argnums=self.static_argnums,
                            axis_size=self.axis_size, fn_name=self.name, devices=self.devices)

    def _trace(self, call: Call, env) -> Traced:
        flat_fun, store = call.flat_function(self.fun, self.name)
        debug = api_util.debug_info("pxla_mlir.pmap", self.fun, tuple(range(len(call.flat_args))), {})
        specs: dict = {}
        flat_fun = self.partitions.body(flat_fun, call, store, specs)  # a partitioned body: its layouts are constraints
        with timed("trace"), self.partitions.partitioning.tracing(self.axis_name, call.axis_size, self.backend,
                                                                  self.name):
            jaxpr = trace_flat(flat_fun, call.shard_avals, [(self.axis_name, call.axis_size)], debug)
        out_axes = flatten_out_axes(store["tree"], self.out_axes, jaxpr.out_avals)
        traced = Traced(jaxpr, store["tree"], out_axes, self.name,
                        cacheable=not any(isinstance(c, core.Tracer) for c in jaxpr.consts),
                        in_specs=specs.get("in"), out_specs=specs.get("out"))
        check_out_axes_none(traced, [a is not None for a in call.in_axes], self.axis_name)
        return traced

    def _params(self, traced: Traced, call: Call) -> PmapParams:
        """This pmap as bound, lowered or run for ``call``."""
        return PmapParams(self.axis_name, call.axis_size, call.in_axes, traced.out_axes, self.name, self.devices,
                          self.backend, call.donated(self.donate_argnums), self.options, self.partitions.partitioning,
                          self.pieces)

    def _bind(self, traced: Traced, call: Call):
        outs = bind(traced.jaxpr, call.flat_args, self._params(traced, call))
        return tree_util.tree_unflatten(traced.out_tree, outs)

    def _lower_traced(self, traced: Traced, call: Call, env) -> Lowered:
        return lower_traced(traced.jaxpr, self._params(traced, call), call.global_avals,
                            signature=call.signature(traced.out_tree), in_specs=traced.in_specs,
                            out_specs=traced.out_specs)

    def _deoptimized(self, traced: Traced, call: Call, env):
        body, _ = call.flat_function(self.fun, self.name)  # the user's function again, as jax.jit does
        return deoptimized(body, call.flat_args, self._params(traced, call))

    def with_options(self, **options) -> PmapFunction:
        """The same pmap with other options (e.g. ``mode``, ``unshard``, ``shardings``), fresh caches."""
        known = {*self._init, *_PIPELINE_OPTIONS}
        unknown = set(options) - known
        if unknown:
            raise TypeError(f"pmap has no option {sorted(unknown)[0]!r}")
        pipeline = {k: options.pop(k) for k in list(options) if k in _PIPELINE_OPTIONS}
        return PmapFunction(self.fun, self._axis_name, **{**self._init, **options},
                            options=configure(self.options, **pipeline))


def check_pieces(pieces: object) -> Literal["on", "off"]:
    if pieces == "on":
        return "on"
    if pieces == "off":
        return "off"
    raise PmapUsageError(f"pieces must be 'on' or 'off', got {pieces!r}{did_you_mean(str(pieces), ('on', 'off'))}")


def _axes_key(axes):
    """in_axes/out_axes as a hashable value (lists and dicts are prefixes too)."""
    leaves, tree = tree_util.tree_flatten(axes, is_leaf=lambda x: x is None)
    return tree, tuple(leaves)


#: pmap's pipeline options, by their API names (mode, unshard, shardings, extra_passes).
_PIPELINE_OPTIONS = tuple(api_options(PmapPipeline))


@overload
def pmap(fun: Callable, axis_name: Hashable | None = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | Sequence[int] = (), devices: Sequence | None = None,
         backend: str | None = None, axis_size: int | None = None, donate_argnums: int | Sequence[int] = (),
         mode: str = "replica", unshard: str = "all-gather",
         shardings: str = "sdy", partitions: Mapping[str, int] | None = None,
         in_partitions: Any = None, out_partitions: Any = None,
         extra_passes: str | Mapping[str, str] | None = None, pieces: str = "on") -> PmapFunction: ...
@overload
def pmap(fun: None = None, axis_name: Hashable | None = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | Sequence[int] = (), devices: Sequence | None = None,
         backend: str | None = None, axis_size: int | None = None, donate_argnums: int | Sequence[int] = (),
         mode: str = "replica", unshard: str = "all-gather",
         shardings: str = "sdy", partitions: Mapping[str, int] | None = None,
         in_partitions: Any = None, out_partitions: Any = None,
         extra_passes: str | Mapping[str, str] | None = None, pieces: str = "on") -> Callable[[Callable], PmapFunction]: ...
@api_boundary
def pmap(fun: Callable | None = None, axis_name: Hashable | None = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | Sequence[int] = (), devices: Sequence | None = None,
         backend: str | None = None, axis_size: int | None = None, donate_argnums: int | Sequence[int] = (),
         mode: str = "replica", unshard: str = "all-gather",
         shardings: str = "sdy", partitions: Mapping[str, int] | None = None,
         in_partitions: Any = None, out_partitions: Any = None, extra_passes: str | Mapping[str, str] | None = None,
         pieces: str = "on") -> PmapFunction | Callable[[Callable], PmapFunction]:
    """Maps ``fun`` over a leading (or ``in_axes``) array axis, one slice per
    device, like ``jax.pmap``; collectives over ``axis_name`` work inside, and
    pmaps nest.

    pxla_mlir's own options: ``mode`` ("replica": the program runs as N
    replicas, as 2022 pmap did; "partition": as N SPMD partitions) and
    ``unshard`` ("all-gather" or the 2022 "all-reduce"), how nested pmaps
    collect their outputs, and ``shardings`` ("sdy": Shardy, or "gspmd"), how
    a partition-mode module states its layout to XLA. ``out_axes=None`` is
    accepted only for outputs that are provably the same on every device.

    ``partitions={"model": 4}`` (with ``mode="partition"``) runs each index on
    a group of devices and lets XLA's partitioner split the body over them:
    ``with_sharding_constraint(v, PartitionSpec(...))`` inside names the
    partition axes, ``in_partitions``/``out_partitions`` (pytree prefixes of
    PartitionSpec) lay each per-index argument/result out over its group
    (the [user guide](guide.md#a-partitioned-body-partitions) shows one).
    ``pmap(sharded_jit(f, in_parts, out_parts))``, 2022's spelling, is that
    pmap of ``f`` in partition mode ([`sharded_jit`][pxla_mlir.sharded_jit]).
    Such a pmap nests in other pmaps given ``mode="partition"``: the nest is
    one program over (outer, inner, ..., partition axes), manual over the pmap
    axes.

    ``extra_passes`` runs passes of your own (registered with
    ``pxla_mlir.register_pass`` or a plugin) in the pipeline: pipeline text as
    ``pxla-opt -p`` takes it, run on the final MHLO before
    ``pxla-verify-handoff``, or ``{"pxla": text, "mhlo": text}`` to also run
    some on the pxla form before its placeholders expand ([passes of your
    own](guide.md#passes-of-your-own-extra_passes)). A pmap nested in another
    map or inside ``jax.jit`` lowers with its enclosing program's pipeline.

    ``pieces`` ("on" or "off") says how a pmap with nested pmaps places its
    values: "on" lets those that go by piece enter and leave as pieces over
    the inner devices; "off" keeps 2022's layout, every value replicated over
    them.

    Returns a callable with jax's AOT API: ``f.lower(*args)`` gives a
    [`Lowered`][pxla_mlir.Lowered].
    """
    sharded = getattr(fun, "sharded_body", None)
    if isinstance(sharded, partitions_mod.ShardedBody):
        if partitions is not None or in_partitions is not None or out_partitions is not None:
            raise TypeError("pmap of a sharded_jit function takes its partitions from sharded_jit's in_parts/"
                            "out_parts: leave out partitions=, in_partitions= and out_partitions=")
        fun, options = sharded.fun, sharded.pmap_options()
        partitions, in_partitions, out_partitions = (options[k] for k in ("partitions", "in_partitions",
                                                                         "out_partitions"))
        static_broadcasted_argnums = sharded.static_argnums or static_broadcasted_argnums
        mode = "partition" if partitions else mode  # the one mode that runs a partitioned body
    if fun is None:
        return functools.partial(pmap, axis_name=axis_name, in_axes=in_axes, out_axes=out_axes,
                                 static_broadcasted_argnums=static_broadcasted_argnums, devices=devices,
                                 backend=backend, axis_size=axis_size, donate_argnums=donate_argnums,
                                 mode=mode, unshard=unshard, shardings=shardings, partitions=partitions,
                                 in_partitions=in_partitions, out_partitions=out_partitions,
                                 extra_passes=extra_passes, pieces=pieces)
    return PmapFunction(fun, axis_name, in_axes=in_axes, out_axes=out_axes,
                        static_broadcasted_argnums=static_broadcasted_argnums, devices=devices, backend=backend,
                        axis_size=axis_size, donate_argnums=donate_argnums,
                        options=configure(PmapPipeline, mode=mode, unshard=unshard, shardings=shardings,
                                          extra_passes=extra_passes),
                        partitions=partitions, in_partitions=in_partitions, out_partitions=out_partitions,
                        pieces=pieces)
