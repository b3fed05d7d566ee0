"""Inputs laid out on the mesh differently from what the xmap maps: an error.

A ``jax.Array`` with a ``NamedSharding`` (one laid out on a mesh: an xmap's
own output, ``jax.device_put(x, NamedSharding(...))``) must be split exactly
as the xmap's ``in_axes`` and ``axis_resources`` split that argument, as in
2022 (``_check_gda_or_array_xmap_partitioning``): resharding it silently
would copy it between devices on every call, hiding a cost the caller can
avoid by laying it out once. Host values and arrays with other shardings
(one device, pmap's) are placed as the xmap needs, as 2022 did.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import NamedSharding

from pxla_mlir.xmaps.plan import XmapError

__all__ = ["check_partitioning"]


def check_partitioning(name: str, args, flat_args: Sequence, expected: Sequence[NamedSharding]) -> None:
    """Raises 2022's ValueError for the first laid-out argument that differs."""
    for i, (x, want) in enumerate(zip(flat_args, expected)):
        got = getattr(x, "sharding", None) if isinstance(x, jax.Array) else None
        if not isinstance(got, NamedSharding) or got.is_equivalent_to(want, x.ndim):
            continue
        where = f"argument {_path(args, i)} of xmap {name!r}"
        fix = (f"lay it out as the xmap maps it first, once: jax.device_put(x, NamedSharding(mesh, {want.spec})) "
               f"on the xmap's mesh")
        if not _same_mesh(got.mesh, want.mesh):
            raise XmapError(f"xmap's mesh and Array's mesh should be equal. Got xmap mesh: {want.mesh},\nArray mesh: "
                            f"{got.mesh}. This is {where}; {fix}")
        raise XmapError(f"Got an input Array to xmap with different partitioning than specified in xmap. The "
                        f"partitioning must match. Got Array spec: {got.spec} and xmap spec: {want.spec}. This is "
                        f"{where}; {fix}")


def _same_mesh(a, b) -> bool:
    return (tuple(a.axis_names) == tuple(b.axis_names) and a.devices.shape == b.devices.shape
            and np.array_equal(np.vectorize(lambda d: d.id)(a.devices), np.vectorize(lambda d: d.id)(b.devices)))


def _path(args, index: int) -> str:
    path, _ = jax.tree_util.tree_flatten_with_path(args)[0][index]
    return "args" + jax.tree_util.keystr(path)
