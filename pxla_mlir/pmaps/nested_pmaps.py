"""Nested pmaps as mesh axes, and a partitioned pmap nested in other pmaps.

``pmap(pmap(body, "inner", partitions={"model": 2}, mode="partition"),
"outer", mode="partition")`` runs one partition-mode program over the mesh
(outer, inner, model), manual over the pmap axes and automatic over the
partition axes: what ``jax.jit(jax.shard_map(f, mesh=Mesh(devices.reshape(o,
i, m), ("outer", "inner", "model")), axis_names={"outer", "inner"}))``
lowers. The whole nest is one manual computation over all its pmap axes;
inside it each nested pmap takes its slice at ``axis_index`` of its axis and
all-gathers its results over it (:func:`.under_jit.lower_inside`), as a
nested pmap does inside jax.jit, so jax's rules lower the collectives, the
device index and the partitioned body's constraints in that partially
manual context. Here: the nest's mesh axes (:func:`nest_chain`), the
partition axes of the pmaps in it (:func:`partitioned_nest`) and the
partitioning a lowering decides once (:func:`program_partitioning`).
"""

from __future__ import annotations

from pxla_mlir.jaxbridge.jax_internals import core
from pxla_mlir.pmaps.arguments import PmapUsageError
from pxla_mlir.pmaps.partition_mesh import describe
from pxla_mlir.pmaps.partition_strategy import UNPARTITIONED, Partitioning
from pxla_mlir.pmaps.primitive import PmapParams, pxla_pmap_p

__all__ = ["nest_chain", "partitioned_nest", "program_partitioning"]


def _pmaps_at_top(jaxpr) -> list:
    """The pmap equations of ``jaxpr`` (in control flow too), not those inside other pmaps."""
    jaxpr = jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive is pxla_pmap_p:
            found.append(eqn)
        else:
            for sub in core.jaxprs_in_params(eqn.params):
                found.extend(_pmaps_at_top(sub))
    return found


def nest_chain(jaxpr) -> list | None:
    """(axis name, size) of the nested pmaps at each level below ``jaxpr``;
    None when pmaps at one level have different axes."""
    pmaps = _pmaps_at_top(jaxpr)
    if not pmaps:
        return []
    levels = {(e.params["axis_name"], e.params["axis_size"]) for e in pmaps}
    if len(levels) > 1:
        return None
    deeper = [nest_chain(e.params["jaxpr"]) for e in pmaps]
    chains = [d for d in deeper if d is not None]
    if len(chains) != len(deeper):
        return None
    longest = max(chains, key=len)
    if any(d != longest[:len(d)] for d in chains):
        return None
    return [levels.pop(), *longest]


def _partitioned(jaxpr) -> list:
    """The partitioned pmap equations nested in ``jaxpr``, at any depth."""
    found = []
    for eqn in _pmaps_at_top(jaxpr):
        found += [eqn] if eqn.params["partitioning"] else _partitioned(eqn.params["jaxpr"])
    return found


def partitioned_nest(jaxpr, axis_name, name: str, what: str = "pmap") -> Partitioning:
    """The nest below ``what`` ``name`` (a pmap's body), checked: one axis per
    level, and all its partitioned pmaps over the same partition axes. Its
    partitioning: those axes, and the nest's pmap axes below the outermost
    (:attr:`.partition_strategy.Partitioning.levels`);
    :data:`.partition_strategy.UNPARTITIONED` if it holds no partitioned pmap."""
    found = _partitioned(jaxpr)
    if not found:
        return UNPARTITIONED
    kinds = {e.params["partitioning"].axes for e in found}
    inner = found[0].params["name"]
    if len(kinds) > 1:
        listed = " and ".join(sorted(describe(k) for k in kinds))
        raise PmapUsageError(f"{what} {name!r} holds partitioned pmaps with different partitions ({listed}): one "
                             f"program has one mesh, so give every partitioned pmap in it the same partitions=")
    chain = nest_chain(jaxpr)
    if chain is None:
        raise PmapUsageError(f"{what} {name!r} holds the partitioned pmap {inner!r} and nested pmaps that map "
                             f"different axes at one level: the program is one mesh with an axis per level, so "
                             f"nest pmaps over one axis per level (or map the others outside)")
    names = [axis_name, *(n for n, _ in chain)]
    reused = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if reused is not None:
        raise PmapUsageError(f"{what} {name!r}: a nested pmap reuses the axis name {reused!r} of an enclosing pmap; "
                             f"give it a new name")
    partitions = kinds.pop()
    clash = {n for n, _ in partitions} & {axis_name, *(n for n, _ in chain)}
    if clash:
        raise PmapUsageError(f"{what} {name!r}: the partition axis {sorted(clash)[0]!r} of the partitioned pmap "
                             f"{inner!r} is also the axis of a pmap around it; give it another name")
    return Partitioning(partitions, tuple(chain))


def program_partitioning(jaxpr, p: PmapParams, what: str = "pmap") -> Partitioning:
    """The partitioning of the program of pmap ``p`` over body ``jaxpr``, decided once per lowering: the
    pmap's own, else that of the partitioned pmaps nested in it (the nest is partitioned as a whole)."""
    return p.partitioning or partitioned_nest(jaxpr, p.axis_name, p.name, what)
