"""The settings of a multi-process run: arguments of
:func:`pxla_mlir.distributed.initialize`, else ``PXLA_MP_*`` environment
variables, else defaults chosen so that a dead run ends within 30 s
(jax's own, 300 s, 100 s and 300 s, leave it hanging for minutes):

* ``initialization_timeout`` / ``PXLA_MP_INIT_TIMEOUT`` (20 s): waiting for
  every process to join (one that never starts, an unreachable coordinator);
* ``heartbeat_timeout_seconds`` / ``PXLA_MP_HEARTBEAT_TIMEOUT`` (20 s): jax's
  backstop for a process that stops answering without its connections
  closing (a frozen host); a killed process is noticed at once;
* ``shutdown_timeout_seconds`` / ``PXLA_MP_SHUTDOWN_TIMEOUT`` (20 s): how long
  the other processes may run on after one has ended its program;
* ``PXLA_MP_CHECK_TIMEOUT`` (120 s): waiting at a launch for a live process
  that took another path (:mod:`.program_check`).

Every value is checked before anything starts, with an error naming the
argument or variable.
"""

from __future__ import annotations

import dataclasses
import math
import os

__all__ = ["ENV_INIT_TIMEOUT", "ENV_HEARTBEAT_TIMEOUT", "ENV_SHUTDOWN_TIMEOUT", "ENV_CHECK_TIMEOUT", "Timeouts",
           "env_int", "seconds", "check_timeout"]

ENV_INIT_TIMEOUT = "PXLA_MP_INIT_TIMEOUT"
ENV_HEARTBEAT_TIMEOUT = "PXLA_MP_HEARTBEAT_TIMEOUT"
ENV_SHUTDOWN_TIMEOUT = "PXLA_MP_SHUTDOWN_TIMEOUT"
ENV_CHECK_TIMEOUT = "PXLA_MP_CHECK_TIMEOUT"

DEFAULT_INIT_S = 20
DEFAULT_HEARTBEAT_S = 20
DEFAULT_SHUTDOWN_S = 20
DEFAULT_CHECK_S = 120


def env_int(name: str, *, minimum: int, meaning: str, argument: str) -> int | None:
    """The integer value of environment variable ``name`` (None when unset or empty)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"environment variable {name}={os.environ[name]!r} is not an integer: set it to "
                         f"{meaning} (an integer, at least {minimum}), or unset it and pass {argument}= to "
                         f"pxla_mlir.distributed.initialize") from None
    if value < minimum:
        raise ValueError(f"environment variable {name}={value} must be at least {minimum}: set it to {meaning}")
    return value


def seconds(value, argument: str, env: str, default: float) -> float:
    """A timeout in seconds: ``value`` (the argument), else ``env``, else ``default``."""
    source = f"{argument}={value!r}"
    if value is None:
        text = os.environ.get(env, "").strip()
        if not text:
            return float(default)
        source, value = f"environment variable {env}={os.environ[env]!r}", text
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number > 0) or isinstance(value, bool):
        raise ValueError(f"{source} is not a timeout: give a positive number of seconds (default {default:g})")
    return number


@dataclasses.dataclass(frozen=True)
class Timeouts:
    """The timeouts of one run, in seconds."""

    init: float
    heartbeat: float
    shutdown: float

    @classmethod
    def resolve(cls, init=None, heartbeat=None, shutdown=None) -> Timeouts:
        return cls(seconds(init, "initialization_timeout", ENV_INIT_TIMEOUT, DEFAULT_INIT_S),
                   seconds(heartbeat, "heartbeat_timeout_seconds", ENV_HEARTBEAT_TIMEOUT, DEFAULT_HEARTBEAT_S),
                   seconds(shutdown, "shutdown_timeout_seconds", ENV_SHUTDOWN_TIMEOUT, DEFAULT_SHUTDOWN_S))


def check_timeout() -> float:
    """Seconds a process waits at a launch for the others (PXLA_MP_CHECK_TIMEOUT)."""
    return seconds(None, "", ENV_CHECK_TIMEOUT, DEFAULT_CHECK_S)
