"""The devices a program runs on: a ``devices=`` list (of pmap,
``pxla_mlir.jit``, ``pxla_mlir.load``) checked before anything is traced or
read."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, overload

import jax

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.sharding.devices import repeated_device

if TYPE_CHECKING:
    from pxla_mlir.runtime.executable import Device

__all__ = ["check_devices", "DevicesError"]


class DevicesError(PxlaUserError, ValueError):
    """A ``devices=`` list that cannot run a program: not devices, empty, one listed twice, mixed platforms."""


@overload
def check_devices(devices: None, what: str = "pmap") -> None: ...
@overload
def check_devices(devices: Iterable[Any], what: str = "pmap") -> tuple[Device, ...]: ...
def check_devices(devices, what: str = "pmap") -> tuple[Device, ...] | None:
    """``devices=`` of ``what`` (pmap, pxla_mlir.jit, pxla_mlir.load) as a
    tuple of distinct jax devices of one platform (or None)."""
    if devices is None:
        return None
    try:
        devs = tuple(devices)
    except TypeError:
        raise DevicesError(f"'devices' argument to {what} must be a sequence of jax devices (e.g. "
                           f"jax.devices()[:4]) or None, got {devices!r}") from None
    if not devs:
        raise DevicesError(f"'devices' argument to {what} must be non-empty, or None. Pass the devices to run on "
                           f"(e.g. jax.devices()[:4]), or None for the first local devices")
    for i, d in enumerate(devs):
        if not isinstance(d, jax.Device):
            hint = f"; use e.g. jax.devices({d!r})[:{len(devs)}]" if isinstance(d, str) else ""
            raise DevicesError(f"'devices' argument to {what} must hold jax devices (from jax.devices()), but "
                               f"devices[{i}] is {d!r} of type {type(d).__name__}{hint}")
    twice = repeated_device(devs)
    if twice is not None:
        first, second = twice
        raise DevicesError(f"'devices' argument to {what} lists {devs[first]} twice (devices[{first}] and "
                           f"devices[{second}]); each device runs one shard, so pass distinct devices (e.g. "
                           f"jax.devices()[:{len(devs)}])")
    platforms = sorted({d.platform for d in devs})
    if len(platforms) > 1:
        raise DevicesError(f"'devices' argument to {what} mixes platforms {platforms}; one program runs on "
                           f"devices of one platform, so pass those (e.g. jax.devices({platforms[0]!r})[:{len(devs)}])")
    return devs
