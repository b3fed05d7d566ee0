"""Every private jax name pxla_mlir uses (``jax._src.*``), in one place.

jax 0.10.2 removed replica-based lowering, so tracing with an axis
environment, lowering with jax's own per-primitive rules and talking to the
PJRT client all go through private APIs; a jax upgrade touches this file.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from jax._src import core, xla_bridge
from jax._src.interpreters import mlir as jax_mlir
from jax._src.lib import xla_client as xc
from jax._src.mesh import AbstractMesh
from jax._src import sharding_impls

__all__ = ["lower_per_device", "compile_options", "backend", "xc", "core"]


def backend(platform: str | None = None):
    return xla_bridge.get_backend(platform)


def lower_per_device(closed_jaxpr: core.ClosedJaxpr, axis_names: Sequence[str], axis_sizes: Sequence[int],
                     *, platform: str = "cpu", name: str = "pxla_fn", donated: Sequence[bool] | None = None):
    """Lowers a per-device jaxpr whose named axes are ``axis_names`` with jax's
    rules, as a manual SPMD program over an abstract mesh (no devices needed).

    Returns jax's StableHLO ``ir.Module`` (in jax's own MLIR context):
    collectives use partition ids, channel handles and global device ids.
    """
    mesh = AbstractMesh(tuple(axis_sizes), tuple(axis_names))
    n = int(np.prod(axis_sizes, dtype=np.int64))
    result = jax_mlir.lower_jaxpr_to_module(
        name, closed_jaxpr, num_const_args=0, in_avals=closed_jaxpr.in_avals, ordered_effects=[],
        platforms=(platform,), backend=backend(platform),
        axis_context=sharding_impls.SPMDAxisContext(mesh, frozenset(axis_names)),
        donated_args=list(donated) if donated is not None else [False] * len(closed_jaxpr.in_avals),
        num_partitions=n, lowering_parameters=jax_mlir.LoweringParameters())
    return result.module


def compile_options(num_replicas: int, num_partitions: int, device_ids: np.ndarray, *,
                    spmd: bool = False) -> xc.CompileOptions:
    """CompileOptions for a replica- or partition-mode module on given devices.

    ``device_ids`` has shape (num_replicas, num_partitions).
    """
    opts = xc.CompileOptions()
    opts.num_replicas = num_replicas
    opts.num_partitions = num_partitions
    build = opts.executable_build_options
    build.num_replicas = num_replicas
    build.num_partitions = num_partitions
    build.use_spmd_partitioning = spmd
    build.use_shardy_partitioner = False  # our modules carry GSPMD (mhlo.sharding) annotations
    opts.device_assignment = xc.DeviceAssignment.create(np.asarray(device_ids).reshape(num_replicas, num_partitions))
    return opts


def compile_and_load(module_text: str, devices: Sequence, options: xc.CompileOptions, platform: str | None = None):
    return backend(platform).compile_and_load(module_text, xc.DeviceList(tuple(devices)), options)
