"""Every private jax name pxla_mlir uses (``jax._src.*``), in one place.

jax 0.10.2 removed replica-based lowering, so tracing with an axis
environment, lowering with jax's own per-primitive rules and talking to the
PJRT client all go through private APIs; a jax upgrade touches this file.
Other modules import the names below from here, never from ``jax._src``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from jax._src import api_util, core, dispatch, sharding_impls, source_info_util, xla_bridge
from jax._src import linear_util as lu
from jax._src.interpreters import ad, batching
from jax._src.interpreters import mlir as jax_mlir
from jax._src.interpreters import partial_eval as pe
from jax._src.lax import parallel as parallel_primitives
from jax._src.lib import xla_client as xc
from jax._src.mesh import AbstractMesh as JaxAbstractMesh

__all__ = ["parallel_primitives", "api_util", "core", "dispatch", "lu", "ad", "batching", "jax_mlir", "pe", "xc", "source_info_util",
           "backend", "lower_per_device", "lower_global", "compile_options", "compile_and_load", "JaxAbstractMesh",
           "spmd_axis_context", "sharding_impls_mesh", "batched_device_put", "array_result_handler"]


def backend(platform: str | None = None):
    return xla_bridge.get_backend(platform)


def spmd_axis_context(axis_names: Sequence, axis_sizes: Sequence[int]):
    """A fully manual SPMD lowering context over an abstract mesh."""
    mesh = JaxAbstractMesh(tuple(axis_sizes), tuple(axis_names))
    return sharding_impls.SPMDAxisContext(mesh, frozenset(axis_names))


def sharding_impls_mesh(axis_context):
    """The abstract mesh of a manual SPMD lowering context, or None for others
    (jax.jit's ShardingContext)."""
    if isinstance(axis_context, sharding_impls.SPMDAxisContext):
        return axis_context.mesh
    return None


def lower_per_device(closed_jaxpr: core.ClosedJaxpr, axis_names: Sequence, axis_sizes: Sequence[int],
                     *, platform: str = "cpu", name: str = "pxla_fn", donated: Sequence[bool] | None = None):
    """Lowers a per-device jaxpr whose named axes are ``axis_names`` with jax's
    rules, as a manual SPMD program over an abstract mesh (no devices needed).

    Returns jax's ``LoweringResult``; its StableHLO module lives in jax's own
    MLIR context. Collectives use partition ids, channel handles and global
    device ids.
    """
    n = int(np.prod(axis_sizes, dtype=np.int64))
    return jax_mlir.lower_jaxpr_to_module(
        name, closed_jaxpr, num_const_args=0, in_avals=closed_jaxpr.in_avals, ordered_effects=[],
        platforms=(platform,), backend=backend(platform),
        axis_context=spmd_axis_context(axis_names, axis_sizes),
        donated_args=list(donated) if donated is not None else [False] * len(closed_jaxpr.in_avals),
        num_partitions=n, lowering_parameters=jax_mlir.LoweringParameters())


def lower_global(closed_jaxpr: core.ClosedJaxpr, num_devices: int, *, platform: str = "cpu",
                 name: str = "pxla_fn", donated: Sequence[bool] | None = None):
    """Lowers a global-view jaxpr (no named axes left) for ``num_devices``
    SPMD partitions, without shardings: pxla passes annotate them."""
    return jax_mlir.lower_jaxpr_to_module(
        name, closed_jaxpr, num_const_args=0, in_avals=closed_jaxpr.in_avals, ordered_effects=[],
        platforms=(platform,), backend=backend(platform),
        axis_context=sharding_impls.ShardingContext(num_devices),
        donated_args=list(donated) if donated is not None else [False] * len(closed_jaxpr.in_avals),
        num_partitions=num_devices, lowering_parameters=jax_mlir.LoweringParameters())


def compile_options(num_replicas: int, num_partitions: int, device_ids: np.ndarray, *,
                    spmd: bool = False, shardy: bool = False) -> xc.CompileOptions:
    """CompileOptions for a replica- or partition-mode module on given devices.

    ``device_ids`` has shape (num_replicas, num_partitions). ``shardy`` must
    follow the module's form: Shardy (sdy) modules fail to compile without it,
    GSPMD (mhlo.sharding) modules fall back to GSPMD with a warning with it.
    """
    opts = xc.CompileOptions()
    opts.num_replicas = num_replicas
    opts.num_partitions = num_partitions
    build = opts.executable_build_options
    build.num_replicas = num_replicas
    build.num_partitions = num_partitions
    build.use_spmd_partitioning = spmd
    build.use_shardy_partitioner = shardy
    opts.device_assignment = xc.DeviceAssignment.create(np.asarray(device_ids).reshape(num_replicas, num_partitions))
    return opts


def compile_and_load(module_or_text, devices: Sequence, options: xc.CompileOptions, platform: str | None = None,
                     host_callbacks: Sequence = ()):
    kwargs = {"host_callbacks": list(host_callbacks)} if host_callbacks else {}
    return backend(platform).compile_and_load(module_or_text, xc.DeviceList(tuple(devices)), options, **kwargs)


def batched_device_put(aval, sharding, pieces, devices, *, force_copy: bool):
    """One jax.Array from per-device host pieces (jaxlib's batched C++ path).

    ``force_copy`` copies each piece so later writes to the caller's numpy
    arrays cannot reach device memory (on CPU the default aliases aligned
    host memory). jaxlib fails ("bad_function_call") if a forced copy is
    asked for a piece that feeds several devices: pass private copies and
    ``force_copy=False`` then.
    """
    return xc.batched_device_put(aval, sharding, pieces, list(devices), True, force_copy)


def array_result_handler(aval, sharding):
    return xc.array_result_handler(aval, sharding, committed=True, _skip_checks=True)
