"""``pxla_mlir.jit`` of xmaps: arguments that each device only slices its tile
out of are placed by tile (pxla-place-tiles at import), as ``jax.jit(shard_map)``
takes its blocks; the layout of those arguments says so."""

from __future__ import annotations

from jax.sharding import NamedSharding, PartitionSpec
from jaxlib.mlir import ir

from pxla_mlir.maps import pxla_form
from pxla_mlir.mlir.core import pxla_attrs
from pxla_mlir.mlir.core.pxla_attrs import TILE_DIMS
from pxla_mlir.mlir.pass_infra import Pipeline, run_pipeline

PLACE_TILES = "builtin.module(pxla-place-tiles)"


def place_tiles(module: ir.Module, labels: dict, jmesh, ndims) -> dict[int, NamedSharding]:
    """Runs pxla-place-tiles on an imported per-device module; the sharding of
    each argument it placed by tile (``labels``: mesh axis -> pxla.mesh name;
    ``ndims``: each argument's rank, without a key array's key data dims)."""
    before = _arg_tiles(module)
    run_pipeline(module, Pipeline.cached(PLACE_TILES), reproducer=False, verify_each=False)
    names = {label: axis for axis, label in labels.items()}
    placed = {}
    for index, (old, new) in enumerate(zip(before, _arg_tiles(module))):
        if old != new:
            spec = [None if not d else names[d[0]] if len(d) == 1 else tuple(names[a] for a in d)
                    for d in new[:ndims[index]]]
            placed[index] = NamedSharding(jmesh, PartitionSpec(*spec))
    return placed


def _arg_tiles(module: ir.Module) -> list:
    with module.context:
        main = pxla_form.main_function(module)
        return [[[ir.StringAttr(a).value for a in ir.ArrayAttr(d)] for d in ir.ArrayAttr(entries[TILE_DIMS])]
                if TILE_DIMS in entries else None for entries in pxla_attrs.boundary_attrs(main, "arg_attrs")]
