"""Compile a final MHLO module through jaxlib: replica/partition counts come
from the module's own attributes, devices from the caller."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from jaxlib.mlir import ir

from . import jax_internals
from .ir.pxla_attrs import device_counts
from .ir.shardy import uses_shardy


def compile_module(module: ir.Module, devices: Sequence, *, platform: str | None = None):
    """A LoadedExecutable of ``module`` on ``devices`` (replica-major order).

    Partition-mode modules compile with XLA's SPMD partitioner (on CPU a
    multi-partition program always needs it); Shardy partitions modules in
    the sdy form, GSPMD the others.
    """
    replicas, partitions = device_counts(module.operation)
    if len(devices) != replicas * partitions:
        raise ValueError(f"the module needs {replicas * partitions} devices (num_replicas = {replicas}, "
                         f"num_partitions = {partitions}), got {len(devices)}")
    ids = np.array([d.id for d in devices]).reshape(replicas, partitions)
    sdy = uses_shardy(module.operation)
    opts = jax_internals.compile_options(replicas, partitions, ids, spmd=partitions > 1 or sdy, shardy=sdy)
    text = module.operation.get_asm(enable_debug_info=False)
    return jax_internals.compile_and_load(text, devices, opts, platform)
