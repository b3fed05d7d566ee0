"""How an executable's buffers become jax values: the physical buffers of an
aval (key arrays, float0), jax's result handlers, result avals typed by their
sharding, and outputs with no elements rebuilt."""

from __future__ import annotations

import functools

import jax
import numpy as np

from pxla_mlir.jaxbridge.executables import array_result_handler, assemble_array, replica_results_need_assembly
from pxla_mlir.jaxbridge.jax_internals import core, dtypes, is_extended, pxla, sharding_impls

__all__ = ["physical", "typed_aval", "result_handler", "needs_assembly", "is_empty"]


def physical(aval, sharding):
    """The aval and sharding of the buffers an argument really is: a key
    array's uint32 data (the key dims replicated), float0 as bool."""
    if aval.dtype == dtypes.float0:
        return core.ShapedArray(aval.shape, np.dtype(np.bool_)), sharding
    if is_extended(aval.dtype):
        phys = core.physical_aval(aval)
        return core.ShapedArray(phys.shape, phys.dtype), sharding_impls.physical_sharding(aval, sharding)
    return aval, sharding


def typed_aval(aval, sharding):
    """``aval`` as jax types the result of a program laid out by ``sharding``:
    a NamedSharding over its mesh's axes (auto axes: no dimension named, as
    jax.jit's and jax.pmap's outputs say); other shardings leave it as it is."""
    if not isinstance(sharding, sharding_impls.NamedSharding) or not hasattr(aval, "ndim"):
        return aval
    mesh = sharding.mesh.abstract_mesh
    return aval.update(sharding=sharding_impls.NamedSharding(mesh, sharding_impls.PartitionSpec(*[None] * aval.ndim)))


def result_handler(aval, sharding, *, replicas: bool = False):
    """jax's own handler: plain arrays, float0 (host zeros, as jax returns
    them) and extended dtypes (key arrays over the physical buffers); an
    output with no elements is rebuilt with its sharding (see
    :func:`_empty_result`). A replica-mode executable's outputs are
    assembled from their buffers where jaxlib needs it
    (:func:`needs_assembly`)."""
    if aval.dtype == dtypes.float0:
        return pxla.global_aval_to_result_handler(aval, sharding, True)
    if is_extended(aval.dtype):
        if needs_assembly(replicas):
            return functools.partial(_assemble_keys, aval, *physical(aval, sharding))
        return pxla.global_aval_to_result_handler(aval, sharding, True)
    if is_empty(aval):
        return _empty_result(aval, sharding)
    if needs_assembly(replicas):
        return functools.partial(assemble_array, aval, sharding)
    return array_result_handler(aval, sharding)


def _assemble_keys(aval, data_aval, data_sharding, buffers):
    return jax.random.wrap_key_data(assemble_array(data_aval, data_sharding, buffers), impl=aval.dtype)


def needs_assembly(replicas: bool) -> bool:
    """Must a program's outputs be assembled from their device buffers
    (``replicas``: it runs in replica mode), so that jaxlib's C++ dispatch,
    which wraps the executable's arrays as they are, cannot run it?"""
    return replicas and replica_results_need_assembly


def is_empty(aval) -> bool:
    return 0 in tuple(aval.shape)


def _empty_result(aval, sharding):
    """XLA's SPMD partitioner hands back an output with no elements whole on
    every device (an (8, 0) buffer per device for an (8, 0) value sharded 8
    ways), so wrapping the buffers in the declared sharding gives a malformed
    Array. Such an output holds no data: it is made afresh with its
    sharding's piece shapes, and XLA's buffers are dropped."""
    empty = np.zeros(aval.shape, aval.dtype)

    def handle(buffers):
        return jax.make_array_from_callback(tuple(aval.shape), sharding, lambda index: empty[index])

    return handle
