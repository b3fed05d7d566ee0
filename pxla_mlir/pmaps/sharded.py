"""``pxla_mlir.sharded_jit``: 2022's name for a partitioned computation.

    f = pxla_mlir.sharded_jit(body, in_parts=(None, P(1, 4)), out_parts=P(1, 4))
    pxla_mlir.pmap(f, "data", in_axes=(0, None))(x, w)   # 2022's pmap(sharded_jit(...))
    f(x[0], w)                                           # one group of 4 devices

2022's partition specs count pieces per dimension (``P(1, 4)``: dimension 1
split 4 ways, None: replicated), every split spec over the same total. Here
they become named partition axes (``part0``, ``part1``, ...) and the
PartitionSpecs of a partitioned pmap (:mod:`.partitions`): the axes are the
finest split that every spec's dimensions are runs of, major first, as
2022's tile assignments ran over the devices (``P(2, 2)`` and ``P(1, 4)``
give axes of sizes 2 and 2, ``P(part0, part1)`` and ``P(None, (part0,
part1))``).

* ``pmap(sharded_jit(f, ...))`` is ``pmap(f, partitions=..., in_partitions=...,
  out_partitions=..., mode="partition")``;
* a bare call is that pmap with axis size 1 and every argument and result
  unmapped (``in_axes=None``, ``out_axes=None``): global values in and out,
  laid out over one group of ``num_partitions`` devices, as 2022's
  sharded_jit outside a pmap returned them.

:func:`with_sharding_constraint` is 2022's constraint by counts inside such
a body.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import jax
from jax import tree_util
from jax.sharding import PartitionSpec

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.maps.arguments import Words
from pxla_mlir.mlir.pipelines import PmapPipeline, configure
from pxla_mlir.mlir.sharding.devices import too_few_devices
from pxla_mlir.pmaps.api import PmapFunction
from pxla_mlir.pmaps.arguments import PmapUsageError, examine_call
from pxla_mlir.pmaps.partition_specs import PartitionWords
from pxla_mlir.pmaps.partitions import ShardedBody

__all__ = ["sharded_jit", "with_sharding_constraint", "AXIS_PREFIX"]

AXIS_PREFIX = "part"


def sharded_jit(fun: Callable, in_parts, out_parts, num_partitions: int | None = None, static_argnums=()):
    """2022's ``sharded_jit``: ``fun`` partitioned over ``num_partitions``
    devices, each argument and result split by ``in_parts``/``out_parts``
    (PartitionSpecs of piece counts per dimension, None: replicated; pytree
    prefixes of the arguments and results): ``pmap(sharded_jit(f, ...))`` is
    ``pmap(f, partitions=..., in_partitions=..., out_partitions=...,
    mode="partition")``, and a bare call runs ``fun`` on global values laid
    out over one group of ``num_partitions`` devices, as 2022's did."""
    if not callable(fun):
        raise TypeError(f"sharded_jit requires a callable, got {fun!r} of type {type(fun).__name__}")
    counts = _count_specs("in_parts", in_parts) + _count_specs("out_parts", out_parts)
    total = _total(counts, num_partitions)
    axes = _axes(counts, total)
    body = ShardedBody(fun, axes, _named(in_parts, axes), _named(out_parts, axes),
                       tuple(static_argnums) if isinstance(static_argnums, (tuple, list)) else (static_argnums,))
    f = ShardedJitFunction(fun, None, in_axes=None, out_axes=None, static_broadcasted_argnums=body.static_argnums,
                           devices=None, backend=None, axis_size=1, donate_argnums=(),
                           options=configure(PmapPipeline, mode="partition"), **body.pmap_options())
    f.sharded_body = body  # pmap(f) maps the body itself
    if f.partitions.partitioning:  # errors of a bare call speak of in_parts/out_parts and the values' counts
        f.partitions = dataclasses.replace(f.partitions, words=PartitionWords(
            "sharded_jit", "in_parts", "out_parts", "value", functools.partial(_as_counts, axes=dict(axes))))
    return f


class ShardedJitKwargsError(PxlaUserError, NotImplementedError):
    """2022's refusal of keyword arguments to a sharded_jit function."""


_WORDS = Words("sharded_jit function", "sharded_jit argument", "static_argnums")


class ShardedJitFunction(PmapFunction):
    """A bare sharded_jit call: its pmap of axis size 1, every value unmapped."""

    what = "sharded_jit"
    sharded_body: ShardedBody

    def _examine(self, args, kwargs):
        if kwargs:  # pmap would map them (its keyword arguments always are), over an axis of size 1
            raise ShardedJitKwargsError(f"sharded_jit over kwargs not yet supported: {self.name!r} was called with "
                                        f"keyword arguments {', '.join(sorted(kwargs))}; pass them positionally "
                                        f"(with an in_parts entry each)")
        if self.partitions.partitioning:
            _check_device_count(self.name, self.partitions.partitioning.size, self.backend)
        return examine_call(args, kwargs, in_axes=self.in_axes, static_argnums=self.static_argnums,
                            axis_size=self.axis_size, fn_name=self.name, devices=self.devices, words=_WORDS)


def _check_device_count(name: str, n: int, backend) -> None:
    if jax.process_count(backend) > 1:
        return  # every process's devices: checked where they are chosen
    available = jax.local_devices(backend=backend)
    if n > len(available):
        platform = available[0].platform
        raise PmapUsageError(f"sharded_jit {name!r} splits its values into {n} partitions, one per device, but only "
                             f"{len(available)} {platform.upper()} devices are available"
                             f"{too_few_devices(n, available, backend)}, or give specs with fewer pieces")


def _as_counts(spec: PartitionSpec, axes: dict) -> PartitionSpec:
    """A spec of partition axes as sharded_jit's piece counts (``P('part0', None)``: ``P(2, 1)``)."""
    return PartitionSpec(*(math.prod(axes[n] for n in (e if isinstance(e, tuple) else (e,))) if e is not None
                           else 1 for e in spec))


def with_sharding_constraint(x, partitions: PartitionSpec | None):
    """2022's constraint inside a sharded_jit body: ``x`` split by piece
    counts per dimension (None: replicated) over the body's partitions."""
    mesh = jax.sharding.get_abstract_mesh()
    axes = tuple((n, s) for n, s, t in zip(mesh.axis_names, mesh.axis_sizes, mesh.axis_types)
                 if t == jax.sharding.AxisType.Auto and n.startswith(AXIS_PREFIX)) if not mesh.empty else ()
    if partitions is None:
        return jax.lax.with_sharding_constraint(x, PartitionSpec())
    spec = _count_spec("with_sharding_constraint partitions", partitions)
    if len(spec) > jax.numpy.ndim(x):
        raise PmapUsageError(f"with_sharding_constraint partitions={partitions} has {len(spec)} entries, but the "
                             f"value has shape {jax.numpy.shape(x)} (rank {jax.numpy.ndim(x)}): give at most one "
                             f"piece count per dimension")
    if not axes:
        raise PmapUsageError(f"with_sharding_constraint(partitions={partitions}) is only meaningful inside a "
                             f"sharded_jit function (pxla_mlir.sharded_jit), whose partitions it splits")
    total = math.prod(s for _, s in axes)
    if math.prod(spec) != total:
        raise ValueError(f"with_sharding_constraint with partitions={partitions} (total partitions: "
                         f"{math.prod(spec)}) doesn't match expected number of partitions: {total}. If these "
                         f"partitions look right, check outer sharded_jit and/or other with_sharding_constraint "
                         f"calls.")
    named = _to_named(spec, axes)
    if named is None:
        sizes = ", ".join(str(s) for _, s in axes)
        raise ValueError(f"with_sharding_constraint with partitions={partitions} does not split along the "
                         f"sharded_jit's partition axes (sizes {sizes}, major first, from its in_parts/out_parts): "
                         f"each dimension's count must be a run of them; give in_parts or out_parts a spec with "
                         f"these counts too")
    return jax.lax.with_sharding_constraint(x, named)


# -- piece counts to named axes ----------------------------------------------------------------

def _is_leaf(x) -> bool:
    return x is None or isinstance(x, PartitionSpec)


def _count_spec(what: str, spec) -> tuple[int, ...]:
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"sharded_jit {what}: expected a PartitionSpec of piece counts per dimension (e.g. "
                        f"PartitionSpec(1, 4)) or None, got {spec!r}")
    counts = tuple(spec)
    for c in counts:
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise TypeError(f"sharded_jit {what}: {spec} must count the pieces of each dimension with positive "
                            f"ints (2022's sharded_jit specs, e.g. PartitionSpec(1, 4)); named axes are pmap's "
                            f"partitions=/in_partitions=")
    return counts


def _count_specs(what: str, tree) -> list[tuple[int, ...]]:
    return [_count_spec(what, s) for s in tree_util.tree_leaves(tree, is_leaf=_is_leaf) if s is not None]


def _total(counts: list, num_partitions: int | None) -> int:
    totals = {math.prod(c) for c in counts if math.prod(c) > 1}
    if len(totals) > 1:
        raise ValueError(f"All partition specs must use the same number of total partitions, got "
                         f"{[PartitionSpec(*c) for c in counts]}, with distinct number of partitions "
                         f"{sorted(totals)} (the total number of partitions is the product of a partition spec)")
    if num_partitions is not None:
        if isinstance(num_partitions, bool) or not isinstance(num_partitions, int) or num_partitions < 1:
            raise ValueError(f"sharded_jit num_partitions must be a positive int, got {num_partitions!r}")
        if totals and totals != {num_partitions}:
            raise ValueError(f"sharded_jit num_partitions={num_partitions}, but its specs split into "
                             f"{totals.pop()} partitions; give num_partitions equal to their product or leave it out")
        return num_partitions
    return totals.pop() if totals else 1


def _cuts(counts: tuple[int, ...]) -> list[int]:
    out, p = [], 1
    for c in counts:
        p *= c
        out.append(p)
    return out


def _axes(counts: list, total: int) -> tuple[tuple[str, int], ...]:
    """The partition axes: one between each pair of consecutive cuts (running products) of all specs."""
    if total == 1:
        return ()
    cuts = sorted({1, total, *(c for spec in counts if math.prod(spec) > 1 for c in _cuts(spec))})
    for a, b in zip(cuts, cuts[1:]):
        if b % a:
            clash = [PartitionSpec(*s) for s in counts if a in _cuts(s) or b in _cuts(s)]
            raise ValueError(f"sharded_jit specs {', '.join(map(str, clash))} split the {total} partitions in "
                             f"orders no one device grid has (running products {a} and {b}: neither divides the "
                             f"other); pxla_mlir lays partitions out as a grid of named axes, so give specs whose "
                             f"counts refine one another (e.g. PartitionSpec(2, 3) with PartitionSpec(1, 6), not "
                             f"PartitionSpec(3, 2))")
    return tuple((f"{AXIS_PREFIX}{i}", b // a) for i, (a, b) in enumerate(zip(cuts, cuts[1:])))


def _to_named(counts: tuple[int, ...], axes) -> PartitionSpec | None:
    """``counts`` over ``axes`` (None: its cuts are not between axes)."""
    edges, p = {}, 1
    for i, (_, s) in enumerate(axes):
        edges[p] = i
        p *= s
    edges[p] = len(axes)
    entries, start = [], 1
    for c in counts:
        end = start * c
        if start not in edges or end not in edges:
            return None
        names = tuple(n for n, _ in axes[edges[start]:edges[end]])
        entries.append(None if not names else names[0] if len(names) == 1 else names)
        start = end
    return PartitionSpec(*entries)


def _named(tree, axes):
    def one(spec):
        if spec is None or not axes:
            return None
        return _to_named(tuple(spec), axes)

    return tree_util.tree_map(one, tree, is_leaf=_is_leaf)
