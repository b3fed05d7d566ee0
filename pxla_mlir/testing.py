"""Helpers for lit tests that print what pxla_mlir emits (``# RUN: %python %s | filecheck %s``)."""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")


def print_lowering(name: str, fn, *args, stage: str = "final") -> None:
    """Prints ``TEST: name`` then the MHLO of ``fn.lower(*args)`` (``stage``:
    "final" or "pxla", the imported form)."""
    lowered = fn.lower(*args)
    print(f"TEST: {name}")
    print(lowered.as_text() if stage == "final" else lowered.pxla_text(), flush=True)
