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

Here: the options, checked when the pmap is made (:func:`make`), and
applied to a call (:class:`PmapPartitions`). The rest by concern: the
strategy a lowering follows (:mod:`.partition_strategy`), the specs' checks
(:mod:`.partition_specs`), the mesh and devices (:mod:`.partition_mesh`),
the layout (:mod:`.partition_layout`) and the import
(:mod:`.partition_import`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
from jax import tree_util
from jax.sharding import PartitionSpec

from pxla_mlir.maps.arguments import Call
from pxla_mlir.mlir.core.pxla_attrs import REP_AXIS
from pxla_mlir.pmaps.arguments import PmapUsageError
from pxla_mlir.pmaps.partition_mesh import enclosing_axes
from pxla_mlir.pmaps.partition_specs import (
    PMAP_PARTITION_WORDS,
    PartitionWords,
    check_divisible,
    check_spec,
    constrain,
    flatten_specs,
    leaves,
)
from pxla_mlir.pmaps.partition_strategy import UNPARTITIONED, Partitioning

__all__ = ["PmapPartitions", "make", "ShardedBody"]

_NAME = re.compile(r"[A-Za-z_]\w*")


@dataclasses.dataclass(frozen=True)
class PmapPartitions:
    """A pmap's partitioning and how its arguments and results are laid out over its axes."""

    partitioning: Partitioning = UNPARTITIONED
    in_partitions: Any = None  # a pytree prefix of the positional arguments (PartitionSpec or None leaves)
    out_partitions: Any = None  # a pytree prefix of the outputs
    words: PartitionWords = dataclasses.field(default=PMAP_PARTITION_WORDS, compare=False)

    def flat_in(self, in_tree: Any, static_args: Sequence[tuple[int, Any]], nargs: int) -> tuple[Any, ...]:
        """Per flat argument: the mesh axes of each dimension of its per-index value (a PartitionSpec)."""
        prefix = self.in_partitions
        static = {i for i, _ in static_args}
        if isinstance(prefix, list):
            prefix = tuple(prefix)
        if isinstance(prefix, tuple) and len(prefix) == nargs and static:
            prefix = tuple(p for i, p in enumerate(prefix) if i not in static)
        w = self.words
        specs = flatten_specs(f"{w.what} {w.in_option}", in_tree, (prefix, None))  # keyword arguments: replicated
        return tuple(check_spec(s, self.partitioning.names, f"{w.in_option} for argument {i}")
                     for i, s in enumerate(specs))

    def flat_out(self, out_tree: Any) -> tuple[Any, ...]:
        w = self.words
        specs = flatten_specs(f"{w.what} {w.out_option}", out_tree, self.out_partitions)
        return tuple(check_spec(s, self.partitioning.names, f"{w.out_option} for output {i}")
                     for i, s in enumerate(specs))

    def key(self) -> Hashable:
        """The layouts as a hashable value (pytree prefixes of PartitionSpecs); None for a plain pmap."""
        if not self.partitioning:
            return None
        flat = [tree_util.tree_flatten(t, is_leaf=lambda x: x is None or isinstance(x, PartitionSpec))
                for t in (self.in_partitions, self.out_partitions)]
        return self.partitioning.axes, tuple((tree, tuple(leaves)) for leaves, tree in flat)

    def environment(self) -> tuple[Any, ...]:
        """What a call's program depends on besides the pmap's options: the pmaps a partitioned body is
        traced inside, whose axes its mesh names."""
        return enclosing_axes() if self.partitioning else ()

    def body(self, flat_fun: Callable[..., Any], call: Call, store: dict[str, Any],
             specs: dict[str, Any]) -> Callable[..., Any]:
        """``flat_fun`` with its inputs and outputs under in/out_partitions (constraints in the body, so
        transformations carry them); the flat specs go to ``specs["in"]`` and, once traced, ``specs["out"]``."""
        if not self.partitioning:
            return flat_fun
        in_specs, w = self.flat_in(call.in_tree, call.static_args, call.nargs), self.words
        sizes = dict(self.partitioning.axes)
        for i, (spec, aval) in enumerate(zip(in_specs, call.shard_avals)):
            if spec is not None and len(spec) <= aval.ndim:
                check_divisible(aval.shape, spec, sizes, w, f"{w.in_option} for argument {i}")
        specs["in"] = in_specs

        def constrained(*leaves: Any) -> list[Any]:
            outs = flat_fun(*constrain(leaves, in_specs, f"{w.in_option} for argument", w))
            specs["out"] = out_specs = self.flat_out(store["tree"])
            for i, (spec, v) in enumerate(zip(out_specs, outs)):
                if spec is not None and len(spec) <= np.ndim(v):
                    check_divisible(np.shape(v), spec, sizes, w, f"{w.out_option} for output {i}")
            return constrain(outs, out_specs, f"{w.out_option} for output", w)

        return constrained


def make(partitions: Any, in_partitions: Any, out_partitions: Any, *, axis_name: Hashable,
         mode: str) -> PmapPartitions:
    """Checks pmap's ``partitions``/``in_partitions``/``out_partitions`` when the pmap is made."""
    if partitions is None or (isinstance(partitions, Mapping) and not partitions):
        given = [n for n, v in (("in_partitions", in_partitions), ("out_partitions", out_partitions)) if v is not None]
        if given:
            raise TypeError(f"pmap {given[0]}= lays values out over partition axes, but the pmap has none: add "
                            f"partitions={{'model': 4}} (names and sizes of the body's partition axes)")
        return PmapPartitions()
    if not isinstance(partitions, Mapping):
        raise TypeError(f"pmap partitions must be a dict of axis names to sizes, e.g. {{'model': 4}}, got "
                        f"{partitions!r}")
    axes: list[tuple[str, int]] = []
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
    partitioning = Partitioning(tuple(axes))
    if mode != "partition":
        raise PmapUsageError(
            f"pmap with partitions={partitioning.describe()} runs each pmap index on {partitioning.size} devices, "
            f"split by XLA's SPMD partitioner: that is one partition-mode program, so pass mode=\"partition\". "
            f"Replica mode cannot run it: jaxlib 0.10.2 aborts the process on modules with both num_replicas > 1 "
            f"and num_partitions > 1 that carry shardings")
    for what, tree in (("in_partitions", in_partitions), ("out_partitions", out_partitions)):
        for leaf in leaves(tree):
            check_spec(leaf, partitioning.names, what)
    return PmapPartitions(partitioning, in_partitions, out_partitions)


class ShardedBody:
    """What ``pmap`` takes from a sharded_jit function (:mod:`.sharded`): the body and its partition axes and layouts."""

    def __init__(self, fun: Callable[..., Any], axes: tuple[tuple[str, int], ...], in_partitions: Any,
                 out_partitions: Any, static_argnums: tuple[int, ...]):
        self.fun, self.axes = fun, axes
        self.in_partitions, self.out_partitions = in_partitions, out_partitions
        self.static_argnums = static_argnums

    def pmap_options(self) -> dict[str, Any]:
        if not self.axes:  # nothing split: an ordinary body
            return dict(partitions=None, in_partitions=None, out_partitions=None)
        return dict(partitions=dict(self.axes), in_partitions=self.in_partitions, out_partitions=self.out_partitions)
