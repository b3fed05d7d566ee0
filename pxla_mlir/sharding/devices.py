"""How many devices pxla_mlir lays values out on, at most."""

from __future__ import annotations

__all__ = ["MAX_DEVICES", "check_device_count"]

#: The most devices a sharding or a mesh may span. Passes and the runtime build
#: device-id tables of this size (8 MiB at the limit); more is a typo or a
#: corrupt attribute, and would exhaust memory before anything else.
MAX_DEVICES = 1 << 20


def check_device_count(n: int, what: str) -> None:
    """Raises ValueError when ``what`` spans more than :data:`MAX_DEVICES` devices."""
    if n > MAX_DEVICES:
        raise ValueError(f"{what} spans {n} devices; at most {MAX_DEVICES} are supported")
