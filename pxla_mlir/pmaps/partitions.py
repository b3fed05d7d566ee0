"""A pmap whose body is itself partitioned (2022's ``pmap(sharded_jit(f))``).

    f = pxla_mlir.pmap(body, "data", partitions={"model": 4}, mode="partition",
                       in_partitions=(P(), P(None, "model")), out_partitions=P(None, "model"))

Each pmap index runs on a group of ``prod(sizes)`` devices: data parallel
across the pmap axis, the body split over its group by XLA's SPMD
partitioner. The program is one partition-mode module over the mesh (pmap
axis, partition axes), manual over the pmap axis and automatic over the
partition axes (jax's ``shard_map(..., axis_names={"data"})``). Inside the
body ``jax.lax.with_sharding_constraint(v, PartitionSpec(...))`` names the
partition axes; ``in_partitions``/``out_partitions`` (pytree prefixes of
PartitionSpec, None: replicated) lay each per-index argument and result out
over its group. They are also constraints inside the body, so grad, vmap
and the other transformations carry them; a transformed pmap's own
arguments and results are replicated over its group. Inside other pmaps the
mesh names their axes first, manual too (:mod:`.nested_pmaps`).

Here: checking the options when the pmap is made, flattening the specs
against a call, the mesh the body is traced under, and the layout of the
global arguments and results. A :class:`Partitioning` is the strategy a
pmap asks all of that of; a plain pmap's is :data:`UNPARTITIONED`, which
answers for a body that is not split (:func:`strategy` picks one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from jax import tree_util
from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec

from pxla_mlir.jaxbridge.jax_internals import api_util, core
from pxla_mlir.maps.arguments import Call
from pxla_mlir.maps.stages import Layout
from pxla_mlir.mlir.ir import pxla_attrs
from pxla_mlir.mlir.ir.pxla_attrs import REP_AXIS
from pxla_mlir.mlir.sharding.devices import too_few_devices
from pxla_mlir.pmaps import partition_import
from pxla_mlir.pmaps.arguments import PmapUsageError
from pxla_mlir.pmaps.layout import Boundary, DeviceLayout

__all__ = ["Partitioning", "Unpartitioned", "UNPARTITIONED", "strategy", "PartitionWords", "PMAP_PARTITION_WORDS",
           "ShardedBody", "make", "PartitionedLayout", "partitioned_devices", "constrain", "check_divisible",
           "tile_dims"]

_NAME = re.compile(r"[A-Za-z_]\w*")


class PartitionWords(NamedTuple):
    """How a partitioned body's call errors name its map, options and values: pmap's, or sharded_jit's."""

    what: str = "pmap"
    in_option: str = "in_partitions"
    out_option: str = "out_partitions"
    value: str = "per-index value"  # what a spec lays out
    show: Callable[[PartitionSpec], Any] = str  # a spec as the user wrote it


PMAP_PARTITION_WORDS = PartitionWords()


@dataclasses.dataclass(frozen=True)
class Partitioning:
    """The partition axes of a pmap's body and how its arguments and results are laid out over them."""

    axes: tuple[tuple[str, int], ...]  # (name, size), major first
    in_partitions: Any = None  # a pytree prefix of the positional arguments (PartitionSpec or None leaves)
    out_partitions: Any = None  # a pytree prefix of the outputs
    words: PartitionWords = dataclasses.field(default=PMAP_PARTITION_WORDS, compare=False)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.axes)

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(s for _, s in self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.sizes)

    def describe(self) -> str:
        return "{" + ", ".join(f"{n!r}: {s}" for n, s in self.axes) + "}"

    # -- a call -------------------------------------------------------------------------------
    def flat_in(self, in_tree, static_args: Sequence, nargs: int) -> tuple:
        """Per flat argument: the mesh axes of each dimension of its per-index value (a PartitionSpec)."""
        prefix = self.in_partitions
        static = {i for i, _ in static_args}
        if isinstance(prefix, list):
            prefix = tuple(prefix)
        if isinstance(prefix, tuple) and len(prefix) == nargs and static:
            prefix = tuple(p for i, p in enumerate(prefix) if i not in static)
        w = self.words
        specs = _flatten(f"{w.what} {w.in_option}", in_tree, (prefix, None))  # keyword arguments: replicated
        return tuple(_check_spec(s, self, f"{w.in_option} for argument {i}") for i, s in enumerate(specs))

    def flat_out(self, out_tree) -> tuple:
        w = self.words
        specs = _flatten(f"{w.what} {w.out_option}", out_tree, self.out_partitions)
        return tuple(_check_spec(s, self, f"{w.out_option} for output {i}") for i, s in enumerate(specs))

    @contextlib.contextmanager
    def tracing(self, axis_name, axis_size: int, backend=None, name=None):
        """The mesh a body is traced under, as jax's shard_map sets it: the pmap
        axis manual, the partition axes automatic (so that
        ``with_sharding_constraint(v, PartitionSpec("model"))`` resolves), on
        ``backend``'s kind of device (so that the body also evaluates inside
        jax's shard_map over real devices, whose mesh names it). Inside other
        pmaps their axes come first, manual too: the nest is one program over
        that mesh (:mod:`.nested_pmaps`)."""
        context = jax.sharding.get_abstract_mesh()
        if not _enclosing.axes and not context.empty and context.manual_axes:  # jax.pmap's or shard_map's
            refuse_nested_partitions(name or axis_name, self.axes)
        kind = device_kind(backend)
        manual = (*_enclosing.axes, (axis_name, axis_size))
        mesh = AbstractMesh((*(s for _, s in manual), *self.sizes), (*(n for n, _ in manual), *self.names),
                            axis_types=(AxisType.Manual,) * len(manual) + (AxisType.Auto,) * len(self.axes),
                            abstract_device=kind)
        with jax.sharding.use_abstract_mesh(mesh):
            yield

    # -- what a pmap asks of its partitioning (Unpartitioned answers for a plain pmap) -----------
    def environment(self) -> tuple:
        """What a call's program depends on besides the pmap's options: the pmaps it is traced inside,
        whose axes its mesh names."""
        return enclosing_axes()

    def key(self) -> tuple:
        """The layouts as a hashable value (pytree prefixes of PartitionSpecs)."""
        flat = [tree_util.tree_flatten(t, is_leaf=lambda x: x is None or isinstance(x, PartitionSpec))
                for t in (self.in_partitions, self.out_partitions)]
        return self.axes, tuple((tree, tuple(leaves)) for leaves, tree in flat)

    def body(self, flat_fun: Callable, call: Call, store: dict, specs: dict) -> Callable:
        """``flat_fun`` with its inputs and outputs under in/out_partitions (constraints in the body, so
        transformations carry them); the flat specs go to ``specs["in"]`` and, once traced, ``specs["out"]``."""
        in_specs, w = self.flat_in(call.in_tree, call.static_args, call.nargs), self.words
        for i, (spec, aval) in enumerate(zip(in_specs, call.shard_avals)):
            if spec is not None and len(spec) <= aval.ndim:
                check_divisible(aval.shape, spec, self, f"{w.in_option} for argument {i}")
        specs["in"] = in_specs

        def constrained(*leaves):
            outs = flat_fun(*constrain(leaves, in_specs, f"{w.in_option} for argument", w))
            specs["out"] = out_specs = self.flat_out(store["tree"])
            for i, (spec, v) in enumerate(zip(out_specs, outs)):
                if spec is not None and len(spec) <= np.ndim(v):
                    check_divisible(np.shape(v), spec, self, f"{w.out_option} for output {i}")
            return constrain(outs, out_specs, f"{w.out_option} for output", w)

        return constrained

    def devices(self, axis_size: int, devices, backend, what: str, nested: int = 1):
        """``devices`` once checked to be enough for every index's group (see :func:`partitioned_devices`)."""
        return partitioned_devices(axis_size, self.axes, devices, backend, what, nested)

    def layout(self, devices: Sequence, axis_size: int, label: str, nested: tuple, boundary: Boundary,
               module=None) -> Layout:
        """The Layout of a pmap's boundary on ``devices`` (see :class:`PartitionedLayout`)."""
        return PartitionedLayout(devices, axis_size, label, self, nested).layout(boundary)

    def check_module(self, module, dialect: str, what: str) -> None:
        """Refuses an imported program the sharding ``dialect`` cannot state."""
        partition_import.check_dialect(module, dialect, what)

    def global_results(self, avals: list) -> list:
        """A partitioned body's values carry its mesh; outside, the results are plain arrays."""
        return [core.ShapedArray(av.shape, av.dtype, weak_type=av.weak_type) for av in avals]

    def refuse_nesting(self, name: str) -> None:
        """Where no mesh names the partition axes (inside jax.pmap, jax.shard_map, a vmapped pmap)."""
        refuse_nested_partitions(name, self.axes)

    # -- import (.importer) -----------------------------------------------------------------
    def refuse_nested_pmaps(self, name: str) -> None:
        """A body with nested pmaps (and no partitioned pmap among them, :mod:`.nested_pmaps`)."""
        raise PmapUsageError(f"pmap {name!r} has partitions= and a nested pmap in its body: a partitioned body "
                             f"cannot hold nested pmaps; nest the partitioned pmap in the others instead "
                             f"(pmap(pmap(body, 'inner', partitions=...), 'outer', mode='partition'))")

    def check_body(self, jaxpr, name: str) -> None:
        """Refuses what jax cannot lower in a partially manual program, before it tries."""
        partition_import.check_callbacks(jaxpr, name)

    def manual_axes(self, pmap_axes: tuple) -> tuple | None:
        """The mesh axes the program is manual over (None: all of them)."""
        return pmap_axes

    def convert(self, lowered, name: str) -> None:
        """jax's lowering of the body in pxla form: its sharding constraints become placeholders."""
        if lowered.host_callbacks:
            partition_import.refuse_callbacks(name)
        partition_import.convert_constraints(lowered.module)

    def mark_manual(self, module, labels: list) -> None:
        """States on the module which of its mesh axes (``labels``) the program is manual over."""
        with module.context:
            pxla_attrs.set_manual_axes(module.operation, labels)


class Unpartitioned:
    """The partitioning of a plain pmap: no partition axes, so every question
    has the answer of a body that is not split."""

    axes: tuple = ()
    names: tuple = ()
    sizes: tuple = ()
    size = 1

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "UNPARTITIONED"

    def describe(self) -> str:
        return "{}"

    def tracing(self, axis_name, axis_size: int, backend=None, name=None):
        """A partitioned pmap traced in the body nests in this pmap's axis."""
        return enclosing(axis_name, axis_size)

    def environment(self) -> tuple:
        return ()

    def key(self) -> None:
        return None

    def body(self, flat_fun: Callable, call: Call, store: dict, specs: dict) -> Callable:
        return flat_fun

    def devices(self, axis_size: int, devices, backend, what: str, nested: int = 1):
        return devices

    def layout(self, devices: Sequence, axis_size: int, label: str, nested: tuple, boundary: Boundary,
               module=None) -> Layout:
        return DeviceLayout(devices, axis_size, label).layout(boundary, module=module)

    def check_module(self, module, dialect: str, what: str) -> None:
        pass

    def global_results(self, avals: list) -> list:
        return avals

    def refuse_nesting(self, name: str) -> None:
        pass

    def refuse_nested_pmaps(self, name: str) -> None:
        pass

    def check_body(self, jaxpr, name: str) -> None:
        pass

    def manual_axes(self, pmap_axes: tuple) -> None:
        return None

    def convert(self, lowered, name: str) -> None:
        pass

    def mark_manual(self, module, labels: list) -> None:
        pass


#: The partitioning of every plain pmap.
UNPARTITIONED = Unpartitioned()


def strategy(axes: tuple) -> Partitioning | Unpartitioned:
    """The partitioning over ``axes`` ((name, size) pairs, as a pxla_pmap equation holds them)."""
    return Partitioning(axes) if axes else UNPARTITIONED


def device_kind(backend=None):
    """The abstract device of ``backend``'s devices, as jax's meshes over them name it."""
    device = jax.local_devices(backend=backend)[0]
    return jax.sharding.Mesh(np.array([device]), ("_",)).abstract_mesh.abstract_device


class _Enclosing(threading.local):
    axes: tuple = ()  # (name, size) of the pmaps whose bodies are being traced or transformed, outermost first


_enclosing = _Enclosing()


def enclosing_axes() -> tuple:
    """The pmap axes around a pmap being traced now: part of a partitioned body's mesh."""
    return _enclosing.axes


@contextlib.contextmanager
def enclosing(axis_name, axis_size: int):
    """While a pmap's body is traced or transformed: a partitioned pmap in it nests in its axis."""
    saved = _enclosing.axes
    _enclosing.axes = (*saved, (axis_name, axis_size))
    try:
        yield
    finally:
        _enclosing.axes = saved


class ShardedBody:
    """What ``pmap`` takes from a sharded_jit function (:mod:`.sharded`): the body and its partition axes and layouts."""

    def __init__(self, fun: Callable, axes: tuple, in_partitions, out_partitions, static_argnums: tuple):
        self.fun, self.axes = fun, axes
        self.in_partitions, self.out_partitions = in_partitions, out_partitions
        self.static_argnums = static_argnums

    def pmap_options(self) -> dict:
        if not self.axes:  # nothing split: an ordinary body
            return dict(partitions=None, in_partitions=None, out_partitions=None)
        return dict(partitions=dict(self.axes), in_partitions=self.in_partitions, out_partitions=self.out_partitions)


def constrain(values: Sequence, specs: Sequence, what: str, words: PartitionWords = PMAP_PARTITION_WORDS) -> list:
    """``values`` under their PartitionSpecs (None: as they are); checks ranks first."""
    out = []
    for i, (v, spec) in enumerate(zip(values, specs)):
        if spec is None:
            out.append(v)
            continue
        shape = np.shape(v)
        if len(spec) > len(shape):
            raise PmapUsageError(f"{what} {i}: {words.show(spec)} has {len(spec)} entries, but its {words.value} has "
                                 f"shape {tuple(shape)} (rank {len(shape)}): give at most one entry per dimension")
        out.append(jax.lax.with_sharding_constraint(v, spec))
    return out


def check_divisible(shape: Sequence[int], spec: PartitionSpec | None, partitioning: Partitioning, what: str) -> None:
    if spec is None:
        return
    sizes = dict(partitioning.axes)
    for d, entry in enumerate(spec):
        parts = math.prod(sizes[a] for a in _names(entry))
        if parts > 1 and shape[d] % parts:
            words = partitioning.words
            raise PmapUsageError(f"{what}: dimension {d} of its {words.value} (shape {tuple(shape)}) has size "
                                 f"{shape[d]}, which {words.show(spec)} splits {parts} ways; use a size divisible by "
                                 f"{parts} or split another dimension")


def make(partitions, in_partitions, out_partitions, *, axis_name, mode: str) -> Partitioning | Unpartitioned:
    """Checks pmap's ``partitions``/``in_partitions``/``out_partitions`` when the pmap is made."""
    if partitions is None or (isinstance(partitions, Mapping) and not partitions):
        given = [n for n, v in (("in_partitions", in_partitions), ("out_partitions", out_partitions)) if v is not None]
        if given:
            raise TypeError(f"pmap {given[0]}= lays values out over partition axes, but the pmap has none: add "
                            f"partitions={{'model': 4}} (names and sizes of the body's partition axes)")
        return UNPARTITIONED
    if not isinstance(partitions, Mapping):
        raise TypeError(f"pmap partitions must be a dict of axis names to sizes, e.g. {{'model': 4}}, got "
                        f"{partitions!r}")
    axes = []
    for name, size in partitions.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name) or name.startswith("_pxla") or name == REP_AXIS:
            raise ValueError(f"pmap partitions: {name!r} is not a partition axis name; use an identifier such as "
                             f"'model'")
        if name == axis_name:
            raise ValueError(f"pmap partitions: {name!r} is also the pmap's axis_name; give the partition axis "
                             f"another name")
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ValueError(f"pmap partitions[{name!r}] must be a positive int (the devices that axis splits "
                             f"each pmap index over), got {size!r}")
        axes.append((name, int(size)))
    result = Partitioning(tuple(axes), in_partitions, out_partitions)
    if mode != "partition":
        raise PmapUsageError(
            f"pmap with partitions={result.describe()} runs each pmap index on {result.size} devices, split by "
            f"XLA's SPMD partitioner: that is one partition-mode program, so pass mode=\"partition\". Replica mode "
            f"cannot run it: jaxlib 0.10.2 aborts the process on modules with both num_replicas > 1 and "
            f"num_partitions > 1 that carry shardings")
    for what, tree in (("in_partitions", in_partitions), ("out_partitions", out_partitions)):
        for leaf in jax.tree_util.tree_leaves(tree, is_leaf=lambda x: x is None):
            _check_spec(leaf, result, what)
    return result


def _flatten(what: str, tree, prefix) -> list:
    try:
        return api_util.flatten_axes(what, tree, prefix)
    except ValueError as e:
        raise PmapUsageError(str(e)) from None


def _names(entry) -> tuple[str, ...]:
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, tuple) else (entry,)


def _check_spec(spec, partitioning: Partitioning, what: str) -> PartitionSpec | None:
    if spec is None:
        return None
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"pmap {what}: expected a jax.sharding.PartitionSpec or None, got {spec!r}")
    seen: set[str] = set()
    for entry in spec:
        if entry is PartitionSpec.UNCONSTRAINED:
            raise ValueError(f"pmap {what}: {spec} leaves a dimension unconstrained; an argument or result needs a "
                             f"layout: name its partition axes or None (not split)")
        for name in _names(entry):
            if name not in partitioning.names:
                raise ValueError(f"pmap {what}: {spec} names {name!r}, which is not a partition axis of this pmap "
                                 f"({', '.join(map(repr, partitioning.names))}); the pmap axis itself maps the "
                                 f"arguments already (in_axes)")
            if name in seen:
                raise ValueError(f"pmap {what}: {spec} names {name!r} twice; a mesh axis splits one dimension")
            seen.add(name)
    return spec


class PartitionedLayout:
    """Where a partitioned pmap's global arguments and results live: the
    devices as a (pmap axis, partition axes...) mesh, index-major (2022's
    replica-major device assignment). A pmap of axis size 1 with every value
    unmapped (a bare sharded_jit call) is one group: its mesh is the partition
    axes alone and each value's spec is its own, as jax.jit with NamedShardings
    over those devices lays them out."""

    def __init__(self, devices: Sequence, axis_size: int, label: str, partitioning: Partitioning,
                 nested: tuple = ()):
        # nested: (label, size) of the pmap axes between (a partitioned pmap nested in this one, .nested_pmaps)
        self.devices = list(devices)
        sizes, names = (s for _, s in nested), (n for n, _ in nested)
        self.mesh = jax.sharding.Mesh(np.array(self.devices, dtype=object).reshape(axis_size, *sizes,
                                                                                   *partitioning.sizes),
                                      (label, *names, *partitioning.names))
        self.axis_size, self.label, self.partitioning, self.nested = axis_size, label, partitioning, nested

    def sharding(self, axis: int | None, ndim: int, spec: PartitionSpec | None) -> NamedSharding:
        entries = list(spec or ()) + [None] * (ndim - (axis is not None) - len(spec or ()))
        if axis is not None:
            entries.insert(axis, self.label)
        return NamedSharding(self.mesh, PartitionSpec(*entries))

    def layout(self, b: Boundary) -> Layout:
        if self.axis_size == 1 and not self.nested and all(a is None for a in (*b.in_axes, *b.out_axes)):
            group = jax.sharding.Mesh(np.array(self.devices, dtype=object).reshape(self.partitioning.sizes),
                                      self.partitioning.names)
            return Layout(self.devices, b.in_avals, b.out_avals,
                          [NamedSharding(group, s if s is not None else PartitionSpec()) for s in b.in_specs],
                          [NamedSharding(group, s if s is not None else PartitionSpec()) for s in b.out_specs],
                          b.donated, b.consts)
        return Layout(self.devices, b.in_avals, b.out_avals,
                      [self.sharding(a, av.ndim, s) for a, av, s in zip(b.in_axes, b.in_avals, b.in_specs)],
                      [self.sharding(a, av.ndim, s) for a, av, s in zip(b.out_axes, b.out_avals, b.out_specs)],
                      b.donated, b.consts)


def tile_dims(spec: PartitionSpec | None, axis: int | None, rank: int, label: str) -> list[list[str]]:
    """``pxla.tile_dims`` of a per-device @main value (rank counts the pmap's unit dimension)."""
    entries = [list(_names(e)) for e in (spec or ())]
    entries += [[] for _ in range(rank - (axis is not None) - len(entries))]
    if axis is not None:
        entries.insert(axis, [label])
    return entries


def describe(partitions: tuple) -> str:
    """(name, size) partition axes as the ``partitions=`` dict."""
    return "{" + ", ".join(f"{k!r}: {v}" for k, v in partitions) + "}"


def partitioned_devices(axis_size: int, partitions: tuple, devices, backend, what: str, nested: int = 1):
    """Checks that there are ``axis_size × group`` devices for a partitioned
    pmap (``devices=`` or the available ones), naming both numbers; returns
    ``devices`` (None: the defaults). ``nested``: devices per index of the
    pmaps nested in this one, a partitioned pmap innermost (:mod:`.nested_pmaps`)."""
    group = math.prod(s for _, s in partitions)
    n = axis_size * nested * group
    parts = describe(partitions)
    need = (f"{what} maps an axis of size {axis_size} and partitions each index over {parts}: it needs "
            f"{axis_size} × {group} = {n} devices") if nested == 1 else (
            f"{what} maps an axis of size {axis_size}, its nested pmaps {nested} devices per index, and a "
            f"partitioned pmap in them {parts}: it needs {axis_size} × {nested} × {group} = {n} devices")
    if devices is not None:
        if len(devices) != n:
            raise PmapUsageError(f"{need}, but devices= lists {len(devices)}; pass exactly {n}, index-major (the "
                                 f"{n // axis_size} devices of index 0 first)")
        return devices
    if jax.process_count(backend) > 1:
        return None  # every process's devices: checked where they are chosen
    available = jax.local_devices(backend=backend)
    if n > len(available):
        platform = available[0].platform
        raise PmapUsageError(f"{need}, but only {len(available)} {platform.upper()} devices are available"
                             + too_few_devices(n, available, backend))
    return None


def refuse_nested_partitions(name: str, partitions: tuple) -> None:
    """A partitioned pmap where no mesh names its partition axes: inside jax.pmap, jax.shard_map or a pmap
    that runs as jax.vmap under jax.jit."""
    spec = ", ".join(repr(k) for k, _ in partitions)
    raise PmapUsageError(
        f"pmap {name!r} with partitions={describe(partitions)} inside jax.pmap, jax.shard_map or a pmap that runs as "
        f"jax.vmap under jax.jit: its program there is manual over every axis, so it has no automatic axes for "
        f"XLA's partitioner to split. A partitioned pmap nests in pxla_mlir.pmap's with mode=\"partition\" (one "
        f"pmap axis per level: the nest is one program manual over its pmap axes, automatic over {spec}), and runs "
        f"inside jax.jit and pxla_mlir.jit; or use jax.jit(jax.shard_map(f, mesh=Mesh(devices.reshape(outer, inner, "
        f"...), ('outer', 'inner', {spec})), axis_names={{'outer', 'inner'}})). A sharded_jit function is such a "
        f"pmap: for 2022's pmap(sharded_jit(f, ...)) use pxla_mlir.pmap (not jax.pmap), which maps f itself with "
        f"its partitions")
