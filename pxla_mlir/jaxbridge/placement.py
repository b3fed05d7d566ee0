"""Host values onto devices, piece by piece: each device gets exactly the
slice its sharding says, through jaxlib's batched C++ path, copied so later
writes to the caller's numpy arrays cannot reach device memory."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np

from pxla_mlir.jaxbridge.executables import batched_device_put
from pxla_mlir.jaxbridge.jax_internals import cc_shard_arg, core

__all__ = ["piece_indices", "piece_plan", "put_pieces", "copying_shard_arg", "same_platform"]


def piece_indices(sharding, shape, devices) -> tuple[list, bool]:
    """The index each device holds, in device order, and whether all differ."""
    by_device = sharding.devices_indices_map(tuple(shape))
    return piece_plan([by_device[d] for d in devices])


def piece_plan(indices: Sequence) -> tuple[list, bool]:
    """Indices of the pieces to put, and whether they all differ."""
    indices = list(indices)
    return indices, len({repr(i) for i in indices}) == len(indices)


def put_pieces(host: np.ndarray, plan: tuple[list, bool], aval, sharding, devices: Sequence) -> jax.Array:
    """One jax.Array from ``host[index]`` for each of ``devices`` (``plan`` from :func:`piece_plan`)."""
    indices, distinct = plan
    if host.size == 0:  # nothing to copy (jaxlib cannot force a copy of zero bytes)
        pieces, force_copy = [np.zeros(host[i].shape, host.dtype) for i in indices], False
    elif distinct and 0 not in host.strides:
        pieces, force_copy = [host[i] for i in indices], True
    else:  # one private copy per distinct piece, shared by the devices that hold it. Pieces of a broadcast
        # array (stride 0) share memory, which jaxlib cannot force-copy either ("bad_function_call").
        copies: dict = {}
        pieces = [copies.setdefault(repr(i), np.array(host[i])) for i in indices]
        force_copy = False
    return batched_device_put(core.ShapedArray(aval.shape, aval.dtype), sharding, pieces, devices,
                              force_copy=force_copy)


def copying_shard_arg(x, sharding, layout):
    """jax's placement of one argument on the C++ path, on a private copy of
    a host numpy array: jax would alias an aligned array's memory on CPU, so a
    write right after the call returns would change what the launch reads."""
    if isinstance(x, np.ndarray):
        x = np.array(x)
    return cc_shard_arg(x, sharding, layout)


def same_platform(a, b) -> bool:
    """Whether shardings ``a`` and ``b`` place their pieces on devices of one
    platform. An array on another platform's devices (a TPU array going into a
    ``backend="cpu"`` map) must be transferred by ``jax.device_put``: handed to
    the executable as it is, or to jaxlib's C++ resharding, its buffers belong
    to another client, and ``PrepareArguments`` crashes."""
    return {d.platform for d in a.device_set} == {d.platform for d in b.device_set}
