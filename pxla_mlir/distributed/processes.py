"""Which devices a map runs on when jax.distributed joins several processes.

A map's program runs on every device it names, and each process feeds and
reads only its own devices. A map given only this process's devices
(``devices=jax.local_devices()``) is a program of this process alone. Devices that leave a process out would hand that
process an Array with none of its pieces; devices spread unevenly would give
processes shares of different sizes. Both are refused before compiling.
By default a map takes the first ``n / P`` devices of each of the ``P``
processes, process-major (process 0's devices first), which is also the
order of the global mapped axis.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence

import jax

from pxla_mlir.errors import PxlaUserError

__all__ = ["MultiProcessError", "process_count", "is_multi_process", "spans_processes", "default_devices",
           "check_devices", "is_local_program"]


class MultiProcessError(PxlaUserError, ValueError):
    """A map that cannot run across the processes of a jax.distributed run."""


def process_count(backend=None) -> int:
    return jax.process_count(backend)


def is_multi_process(backend=None) -> bool:
    return jax.process_count(backend) > 1


def spans_processes(devices: Sequence) -> bool:
    """Whether some of ``devices`` belong to another process than this one."""
    me = jax.process_index()
    return any(d.process_index != me for d in devices)


def _cpu_hint(per_process: int, platform: str) -> str:
    if platform != "cpu":
        return ""
    return (f"; or start every process with {per_process} CPU devices (jax.config.update('jax_num_cpu_devices', "
            f"{per_process}) before jax.distributed.initialize, or XLA_FLAGS="
            f"--xla_force_host_platform_device_count={per_process})")


def default_devices(n: int, backend, what: str) -> list:
    """The first ``n / P`` devices of every process, process-major."""
    count = process_count(backend)
    local = {p: jax.local_devices(process_index=p, backend=backend) for p in range(count)}
    platform = local[0][0].platform
    shares = (f"host inputs are this process's share of the mapped axis (the global axis is the local size "
              f"times {count}): pass each process its own rows, or a global jax.Array")
    if n % count:
        raise MultiProcessError(
            f"{what} needs {n} devices, but a multi-process run spreads a map evenly over its {count} processes and "
            f"{n} is not a multiple of {count}; {shares}, or pass devices= explicitly")
    per = n // count
    short = [p for p, devs in local.items() if len(devs) < per]
    if short:
        p = short[0]
        raise MultiProcessError(
            f"{what} needs {n} devices, {per} on each of the {count} processes, but process {p} has only "
            f"{len(local[p])} {platform.upper()} devices. In a multi-process run {shares}"
            + _cpu_hint(per, platform))
    return [d for p in range(count) for d in local[p][:per]]


def is_local_program(devices: Sequence | None) -> bool:
    """Are ``devices`` (given to a map) this process's alone? Such a map is a
    program of this process only, as jax.pmap with ``devices=jax.local_devices()``:
    host inputs are whole values and nothing is exchanged with other processes."""
    return devices is not None and process_count() > 1 and not spans_processes(devices)


def check_devices(devices: Sequence, what: str) -> list:
    """``devices`` unchanged if they cover every process evenly, or are this
    process's alone (a per-process map), or the run has one process."""
    devices = list(devices)
    if not devices:
        return devices
    count = jax.process_count()
    if count == 1 or not spans_processes(devices):
        return devices
    per = collections.Counter(d.process_index for d in devices)
    missing = [p for p in range(count) if p not in per]
    if missing:
        held = ", ".join(f"process {p}: {n}" for p, n in sorted(per.items()))
        raise MultiProcessError(
            f"{what} runs on devices of {_processes(sorted(per))} only ({held}), but this run has {count} processes: "
            f"{_processes(missing)} would get an Array with none of its pieces. In a multi-process run a map's "
            f"devices must include the same number of devices from every process; pass devices=None (the first "
            f"devices of every process, process 0's first) or add devices of {_processes(missing)} (e.g. "
            f"jax.devices())")
    if len(set(per.values())) > 1:
        held = ", ".join(f"{n} of process {p}" for p, n in sorted(per.items()))
        raise MultiProcessError(
            f"{what} runs on {held}: a multi-process map needs the same number of devices from every process "
            f"(each process feeds and reads an equal share); pass devices=None or balance the list")
    return devices


def _processes(ids) -> str:
    ids = list(ids)
    return ("process " if len(ids) == 1 else "processes ") + ", ".join(map(str, ids))
