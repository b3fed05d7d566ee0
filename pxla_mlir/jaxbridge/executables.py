"""XLA programs through jaxlib's client: HLO from a final module, compiled
and loaded on the client that owns the devices, serialized and back; host
pieces placed on devices, result buffers wrapped as ``jax.Array``s, and the
C++ dispatch path jax.jit uses.

Built on the private names of :mod:`.jax_internals`, with the branches where
jaxlib releases differ (each says which releases take it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pxla_mlir.jaxbridge.jax_internals import (
    cc_shard_arg,
    dispatch,
    ifrt_version,
    jaxlib_ext,
    jaxlib_extension_version,
    tree_util,
    xc,
)

__all__ = ["array_result_handler", "assemble_array", "batched_device_put", "compile_and_load", "cpp_dispatch",
           "deserialize_executable", "device_client", "replica_results_need_assembly", "serialize_executable",
           "set_runtime_tokens", "xla_computation"]


def xla_computation(module_text: str):
    """XLA's HLO (an ``XlaComputation``) of a final MHLO module."""
    return jaxlib_ext.mlir.mlir_module_to_xla_computation(module_text, use_tuple_args=False)


def device_client(devices: Sequence):
    """The PjRt client that owns ``devices`` (as jax compiles for a device
    assignment: ``xb.get_device_backend(devices[0])``), never the default
    backend's: an executable of one client given another client's buffers
    crashes in ``PrepareArguments``."""
    client = devices[0].client
    if any(d.client is not client for d in devices):
        raise ValueError(f"devices {list(devices)} belong to several XLA clients; one program runs on one client's "
                         f"devices")
    return client


def compile_and_load(module_or_text, devices: Sequence, options, host_callbacks: Sequence = ()):
    """An executable of ``module_or_text`` on ``devices``, compiled by the client that owns them
    (``options``: an ``xc.CompileOptions``)."""
    kwargs = {"host_callbacks": list(host_callbacks)} if host_callbacks else {}
    return device_client(devices).compile_and_load(module_or_text, xc.DeviceList(tuple(devices)), options, **kwargs)


def serialize_executable(executable) -> bytes:
    return executable.serialize()


def deserialize_executable(data: bytes, devices: Sequence, options):
    return device_client(devices).deserialize_executable(data, xc.DeviceList(tuple(devices)), options)


def batched_device_put(aval, sharding, pieces, devices, *, force_copy: bool):
    """One jax.Array from per-device host pieces (jaxlib's batched C++ path).

    ``force_copy`` copies each piece so later writes to the caller's numpy
    arrays cannot reach device memory (on CPU the default aliases aligned
    host memory). jaxlib fails ("bad_function_call") if a forced copy is
    asked for a piece that feeds several devices: pass private copies and
    ``force_copy=False`` then.
    """
    return xc.batched_device_put(aval, sharding, pieces, list(devices), True, force_copy)


#: jaxlib before extension version 489 (jax 0.10.x) checks results unless told not to; later ones never do.
_RESULT_HANDLER_KWARGS = {"_skip_checks": True} if jaxlib_extension_version < 489 else {}


def array_result_handler(aval, sharding):
    return xc.array_result_handler(aval, sharding, committed=True, **_RESULT_HANDLER_KWARGS)


#: jaxlib 0.12 (extension 495+, IFRT 71+) copies a whole jax.Array to the host through its IFRT array. A
#: replica-mode executable's outputs are per-replica IFRT arrays, which jaxlib's result handler relabels
#: but cannot copy ("Shape mismatch during ToLiteral conversion"): assemble them from the device buffers.
replica_results_need_assembly = jaxlib_extension_version >= 495 and ifrt_version >= 71


def assemble_array(aval, sharding, buffers):
    """One jax.Array of ``aval`` laid out by ``sharding`` from its single-device buffers (no copy)."""
    return xc.ArrayImpl(aval, sharding, list(buffers), committed=True, **_RESULT_HANDLER_KWARGS)


def cpp_dispatch(name: str, fun: Callable, cache_miss: Callable, static_argnums: Sequence[int], *,
                 capacity: int, shard_arg: Callable = cc_shard_arg) -> Callable:
    """jaxlib's C++ ``PjitFunction``: calls with a signature it has seen run
    from the fast-path data ``cache_miss`` returned for it, without Python
    (``shard_arg`` places arguments that are not ready jax.Arrays); ``fun``
    runs under ``jax.disable_jit()``. It keeps at most ``capacity``
    signatures, least recently used first out, in a cache of its own: an
    entry holds its executable alive, so a cache shared by every map would
    keep programs that the map's own bounded caches have dropped."""
    return jaxlib_ext.pjit(name, fun, cache_miss, list(static_argnums), [], "pxla_mlir", tree_util.dispatch_registry,
                           shard_arg, jaxlib_ext.PjitFunctionCache(capacity=capacity))


def set_runtime_tokens(devices, token) -> None:
    """Registers a launch's completion token per device, so that
    ``jax.effects_barrier()`` and jax's exit hook wait for its host callbacks."""
    for i, device in enumerate(devices):
        dispatch.runtime_tokens.set_output_runtime_token(device, token.get_token(i))
