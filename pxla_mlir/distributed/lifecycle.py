"""Starting a multi-process run, and ending every process when one fails.

``initialize`` is ``jax.distributed.initialize`` (same arguments; they
default to the ``PXLA_MP_*`` variables set by ``pxla-mlir run --processes``
and :mod:`.launch`) plus what keeps a failure from leaving the other
processes blocked:

* An uncaught exception in one process is announced through the
  coordination service's key-value store, and that process ends at once
  (plain jax would first wait up to ``shutdown_timeout_seconds`` at its exit
  barrier while the others block in a collective that never completes).
  Every other process prints which process failed and why, and ends with
  exit code ``PEER_FAILED_EXIT``.
* A process that dies without a word (killed, crashed) is found by the
  coordination service when its heartbeats stop: jax then ends each other
  process with SIGABRT about ``heartbeat_timeout_seconds`` later (default
  100), logging which task died; if the dead process hosted the service
  (process 0), within a fraction of a second. ``faulthandler`` is enabled so
  the abort also shows where each thread of Python was.
"""

from __future__ import annotations

import atexit
import faulthandler
import os
import sys
import threading

import jax

from ..jax_internals import distributed_client
from .launch import ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID

__all__ = ["initialize", "PEER_FAILED_EXIT"]

#: Exit code of a process ended because another process of the run failed.
PEER_FAILED_EXIT = 75
_FAILED = "pxla_mlir/failed"
_POLL_MS = 500
_ACK_WAIT_S = 3.0


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *, cpu_devices: int | None = None, end_all_on_failure: bool = True,
               **jax_options) -> None:
    """``jax.distributed.initialize`` for pxla_mlir's maps.

    ``cpu_devices`` sets this process's number of virtual CPU devices.
    ``jax_options`` go to jax unchanged: ``heartbeat_timeout_seconds`` (how
    long a dead process goes unnoticed, default 100), ``initialization_timeout``,
    ``shutdown_timeout_seconds``, ``local_device_ids``, ...
    ``end_all_on_failure=False`` leaves failure handling to jax alone.
    """
    env = os.environ
    coordinator_address = coordinator_address or env.get(ENV_COORDINATOR)
    if num_processes is None and env.get(ENV_NUM_PROCESSES):
        num_processes = int(env[ENV_NUM_PROCESSES])
    if process_id is None and env.get(ENV_PROCESS_ID):
        process_id = int(env[ENV_PROCESS_ID])
    if cpu_devices is not None:
        jax.config.update("jax_num_cpu_devices", int(cpu_devices))
    jax.distributed.initialize(coordinator_address, num_processes, process_id, **jax_options)
    if end_all_on_failure and jax.process_count() > 1:
        _FailureWatch.start_once()


class _FailureWatch:
    """Ends this process when another announces an uncaught exception, and
    announces this process's own."""

    _instance: "_FailureWatch | None" = None

    @classmethod
    def start_once(cls) -> None:
        if cls._instance is None:
            cls._instance = cls()

    def __init__(self):
        self.client = distributed_client()
        self.me, self.count = jax.process_index(), jax.process_count()
        self._stop = threading.Event()
        self._previous_hook = sys.excepthook
        sys.excepthook = self._excepthook
        if not faulthandler.is_enabled():
            faulthandler.enable()
        self._thread = threading.Thread(target=self._watch, name="pxla_mlir-failure-watch", daemon=True)
        self._thread.start()
        atexit.register(self._stop_watching)  # runs before jax's own exit handler shuts the client down

    def _stop_watching(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * _POLL_MS / 1000)

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                message = self.client.blocking_key_value_get(_FAILED, _POLL_MS)
            except Exception as e:  # jaxlib's runtime error: a timeout, a shutdown, or the service is gone
                if "DEADLINE_EXCEEDED" in str(e):
                    continue
                if self._stop.is_set() or "UNAVAILABLE" not in str(e):
                    return  # jax.distributed.shutdown() cancelled the wait
                _end(f"pxla_mlir: process {self.me} lost the JAX coordination service "
                     f"({str(e).splitlines()[0][:200]}); process 0, which hosts it, has probably ended. Ending "
                     f"process {self.me} too: its collectives cannot complete.", PEER_FAILED_EXIT)
            if message.startswith(f"process {self.me} "):
                return  # our own announcement
            self._end_for_peer(message)

    def _end_for_peer(self, message: str) -> None:
        print(f"pxla_mlir: {message}\npxla_mlir: ending process {self.me} too (exit {PEER_FAILED_EXIT}): the "
              f"other processes' collectives cannot complete without it.", file=sys.stderr, flush=True)
        try:
            self.client.key_value_set(f"{_FAILED}/ack/{self.me}", "1")
            if self.me == 0:  # hosts the service: its end would abort the failing process mid-announcement
                self.client.blocking_key_value_get(f"{_FAILED}/gone", int(_ACK_WAIT_S * 1000))
        except Exception:
            pass
        _end("", PEER_FAILED_EXIT)

    def _excepthook(self, etype, value, tb) -> None:
        self._previous_hook(etype, value, tb)
        try:
            first = (str(value).strip().splitlines() or [""])[0][:300]
            self.client.key_value_set(_FAILED, f"process {self.me} failed with {etype.__name__}: {first}")
            # Wait until the others have said why they end (process 0 waits for us instead).
            for other in range(self.count):
                if other != self.me and (other != 0 or self.me == 0):
                    self.client.blocking_key_value_get(f"{_FAILED}/ack/{other}", int(_ACK_WAIT_S * 1000))
            self.client.key_value_set(f"{_FAILED}/gone", "1")
        except Exception:  # another process failed first, or the service is gone: end anyway
            pass
        _end(f"pxla_mlir: process {self.me} ends after an uncaught {etype.__name__}; the other processes are "
             f"told to end too.", 1)


def _end(message: str, code: int) -> None:
    try:
        sys.stdout.flush()
        if message:
            print(message, file=sys.stderr, flush=True)
    finally:
        os._exit(code)
