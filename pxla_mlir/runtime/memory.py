"""Programs that cannot fit in memory are refused at the call, as jax.jit's are.

On one device XLA:CPU allocates a launch's outputs before the launch returns,
so jax.jit raises ``RESOURCE_EXHAUSTED``. Across several devices the
allocation happens later, on XLA's threads: the call returns arrays without
buffers, and reading one aborts the process (``Check failed:
buffer_.IsConcrete()``). So a compiled map's needs (XLA's per-device output
and temporary sizes) are compared once with what its devices can hold: a
CPU's devices share the host's memory (RAM and swap, or the cgroup's limit),
another platform's device has its own ``bytes_limit``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import jax

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.jaxbridge.jax_internals import JaxRuntimeError

__all__ = ["ResourceExhaustedError", "shortfall", "host_memory_bytes"]


class ResourceExhaustedError(PxlaUserError, JaxRuntimeError):
    """A map whose launch needs more memory than its devices have (jax's RESOURCE_EXHAUSTED)."""


def host_memory_bytes() -> int | None:
    """RAM plus swap, or the cgroup's memory limit if lower; None if unknown."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None
    try:
        with open("/proc/meminfo") as f:
            swap = next((int(line.split()[1]) * 1024 for line in f if line.startswith("SwapTotal:")), 0)
    except OSError:
        swap = 0
    limit = total + swap
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                value = f.read().strip()
        except OSError:
            continue
        if value.isdigit():
            limit = min(limit, int(value))
    return limit


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return ""


def shortfall(xla, devices: Sequence, what: str) -> str | None:
    """Why ``xla`` (a LoadedExecutable on ``devices``) cannot run, in jax's
    RESOURCE_EXHAUSTED words, or None when it fits (or nothing is known)."""
    try:
        stats = xla.get_compiled_memory_stats()
    except Exception:  # not every backend reports it
        return None
    per_device = stats.output_size_in_bytes + stats.temp_size_in_bytes - stats.alias_size_in_bytes
    me = jax.process_index()
    local = [d for d in devices if d.process_index == me]
    if per_device <= 0 or not local:
        return None
    parts = (f"{_size(stats.output_size_in_bytes)} of outputs and {_size(stats.temp_size_in_bytes)} of temporaries "
             f"per device")
    if local[0].platform == "cpu":
        limit = host_memory_bytes()
        need = per_device * len(local)
        if limit is None or need <= limit:
            return None
        return (f"RESOURCE_EXHAUSTED: Out of memory allocating {need} bytes: {what} needs {_size(need)} on this host "
                f"({len(local)} CPU devices x {parts}), but the host has {_size(limit)} of memory (RAM and swap, "
                f"or the cgroup limit). Make the outputs smaller (map over fewer elements or a smaller dtype), or "
                f"run on fewer devices")
    stats_of = getattr(local[0], "memory_stats", None)
    limit = (stats_of() or {}).get("bytes_limit") if stats_of else None
    if not limit or per_device <= limit:
        return None
    return (f"RESOURCE_EXHAUSTED: Out of memory allocating {per_device} bytes: {what} needs {_size(per_device)} on "
            f"each device ({parts}), but {local[0]} has {_size(limit)}. Make the outputs smaller or spread them "
            f"over more devices")
