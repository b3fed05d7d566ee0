"""The PartitionSpecs of a partitioned pmap (:mod:`.partitions`), checked.

``in_partitions``/``out_partitions`` name partition axes per dimension of a
per-index value; here: each spec checked against the axes when the pmap is
made, flattened against a call, applied as sharding constraints in the body
and checked against the shapes they split. Errors name the map, its options
and its values in the words of the map the user called (:class:`PartitionWords`:
pmap's or sharded_jit's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import PartitionSpec

from pxla_mlir.jaxbridge.jax_internals import api_util
from pxla_mlir.pmaps.arguments import PmapUsageError

__all__ = ["PartitionWords", "PMAP_PARTITION_WORDS", "check_spec", "flatten_specs", "spec_axes", "constrain",
           "check_divisible"]


class PartitionWords(NamedTuple):
    """How a partitioned body's call errors name its map, options and values: pmap's, or sharded_jit's."""

    what: str = "pmap"
    in_option: str = "in_partitions"
    out_option: str = "out_partitions"
    value: str = "per-index value"  # what a spec lays out
    show: Callable[[PartitionSpec], Any] = str  # a spec as the user wrote it


PMAP_PARTITION_WORDS = PartitionWords()


def spec_axes(entry: Any) -> tuple[str, ...]:
    """The mesh axes one entry of a PartitionSpec names (None: none, a tuple: several)."""
    if entry is None:
        return ()
    return tuple(entry) if isinstance(entry, tuple) else (entry,)


def check_spec(spec: object, axis_names: Sequence[str], what: str) -> PartitionSpec | None:
    """``spec`` (a leaf of in/out_partitions) if it is a PartitionSpec over ``axis_names`` or None."""
    if spec is None:
        return None
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"pmap {what}: expected a jax.sharding.PartitionSpec or None, got {spec!r}")
    seen: set[str] = set()
    for entry in spec:
        if entry is PartitionSpec.UNCONSTRAINED:
            raise ValueError(f"pmap {what}: {spec} leaves a dimension unconstrained; an argument or result needs a "
                             f"layout: name its partition axes or None (not split)")
        for name in spec_axes(entry):
            if name not in axis_names:
                raise ValueError(f"pmap {what}: {spec} names {name!r}, which is not a partition axis of this pmap "
                                 f"({', '.join(map(repr, axis_names))}); the pmap axis itself maps the "
                                 f"arguments already (in_axes)")
            if name in seen:
                raise ValueError(f"pmap {what}: {spec} names {name!r} twice; a mesh axis splits one dimension")
            seen.add(name)
    return spec


def flatten_specs(what: str, tree: Any, prefix: Any) -> list[Any]:
    """A pytree prefix of specs, one leaf per leaf of ``tree`` (jax's ``in_axes`` flattening)."""
    try:
        return api_util.flatten_axes(what, tree, prefix)
    except ValueError as e:
        raise PmapUsageError(str(e)) from None


def constrain(values: Sequence[Any], specs: Sequence[PartitionSpec | None], what: str,
              words: PartitionWords = PMAP_PARTITION_WORDS) -> list[Any]:
    """``values`` under their PartitionSpecs (None: as they are); checks ranks first."""
    out: list[Any] = []
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


def check_divisible(shape: Sequence[int], spec: PartitionSpec | None, sizes: Mapping[str, int],
                    words: PartitionWords, what: str) -> None:
    """Each dimension of ``shape`` divides into the parts ``spec`` splits it in (``sizes``: of the partition axes)."""
    if spec is None:
        return
    for d, entry in enumerate(spec):
        parts = math.prod(sizes[a] for a in spec_axes(entry))
        if parts > 1 and shape[d] % parts:
            raise PmapUsageError(f"{what}: dimension {d} of its {words.value} (shape {tuple(shape)}) has size "
                                 f"{shape[d]}, which {words.show(spec)} splits {parts} ways; use a size divisible by "
                                 f"{parts} or split another dimension")


def leaves(tree: Any) -> Iterable[Any]:
    """The specs of a pytree prefix of in/out_partitions (None leaves included)."""
    return jax.tree_util.tree_leaves(tree, is_leaf=lambda x: x is None)
