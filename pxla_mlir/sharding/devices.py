"""How many devices pxla_mlir lays values out on, at most, and that each is
listed once (every entry point taking devices checks them here)."""

from __future__ import annotations

__all__ = ["MAX_DEVICES", "check_device_count", "repeated_device"]

#: The most devices a sharding or a mesh may span. Passes and the runtime build
#: device-id tables of this size (8 MiB at the limit); more is a typo or a
#: corrupt attribute, and would exhaust memory before anything else.
MAX_DEVICES = 1 << 20


def check_device_count(n: int, what: str) -> None:
    """Raises ValueError when ``what`` spans more than :data:`MAX_DEVICES` devices."""
    if n > MAX_DEVICES:
        raise ValueError(f"{what} spans {n} devices; at most {MAX_DEVICES} are supported")


def repeated_device(devices) -> tuple[int, int] | None:
    """The positions ``(first, second)`` of the first device listed twice, or
    None when all are distinct. XLA runs one shard per device: given one
    device twice it compiles and launches, then fails reading the results
    (``INTERNAL: Device 0 not unique``) or returns garbage."""
    seen: dict = {}
    for i, d in enumerate(devices):
        key = (getattr(d, "platform", None), getattr(d, "id", d))
        if key in seen:
            return seen[key], i
        seen[key] = i
    return None
