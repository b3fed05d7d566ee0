"""Starting a multi-process run, and ending every process when one fails.

``initialize`` is ``jax.distributed.initialize`` (same arguments; they
default to the ``PXLA_MP_*`` variables set by ``pxla-mlir run --processes``
and :mod:`.launch`) plus what keeps a run that cannot start or cannot go on
from aborting or hanging its processes:

* its arguments are checked before anything starts;
* every process joins through process 0 first (:mod:`.rendezvous`): a
  process that never comes, an unreachable coordinator, a process id out
  of range or twice, a port in use are Python errors on every process that
  came, within ``initialization_timeout`` (jax would SIGABRT them);
* the join's connections stay open as the run's link (:mod:`.link`): a
  process that fails (an uncaught exception), dies (killed, crashed) or
  ends its program while others still run ends every process within
  milliseconds (``shutdown_timeout_seconds`` for the last), each saying
  why, with exit code :data:`PEER_FAILED_EXIT`;
* jax's own timeouts are what :mod:`.settings` says (20 s by default, not
  jax's 300/100/300 s), as a backstop.

``faulthandler`` is enabled so that an abort from jax's runtime still shows
where each thread of Python was.
"""

from __future__ import annotations

import faulthandler
import math
import os

import jax

from pxla_mlir.distributed import link, rendezvous
from pxla_mlir.distributed.launch import ENV_COORDINATOR, ENV_NUM_PROCESSES, ENV_PROCESS_ID
from pxla_mlir.distributed.link import PEER_FAILED_EXIT
from pxla_mlir.distributed.settings import Timeouts, env_int
from pxla_mlir.jaxbridge.jax_internals import backends_are_initialized, cluster_launch

__all__ = ["initialize", "shutdown", "PEER_FAILED_EXIT"]

#: jax's shutdown barrier waits this much longer than the link, which ends stragglers with a message first.
_JAX_SHUTDOWN_MARGIN_S = 10
_joined: dict | None = None  # this process's run, once initialize succeeded


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *, cpu_devices: int | None = None, end_all_on_failure: bool = True,
               initialization_timeout: float | None = None, heartbeat_timeout_seconds: float | None = None,
               shutdown_timeout_seconds: float | None = None, **jax_options) -> None:
    """``jax.distributed.initialize`` for pxla_mlir's maps.

    ``coordinator_address``, ``num_processes`` and ``process_id`` default to
    ``PXLA_MP_COORDINATOR``, ``PXLA_MP_NUM_PROCESSES`` and
    ``PXLA_MP_PROCESS_ID``, then to what jax's cluster detection reads from a
    launcher (``mpirun``, ``srun``; the run then gets the same checks and
    failure handling); without either, jax decides.
    ``cpu_devices`` sets this process's number of virtual CPU devices.
    ``initialization_timeout``: how long processes wait for each other to
    join; ``heartbeat_timeout_seconds``: jax's backstop for a process that
    stops answering; ``shutdown_timeout_seconds``: how long the others may
    run on after a process ended its program (each 20 s unless given, or set
    by ``PXLA_MP_INIT_TIMEOUT``, ``PXLA_MP_HEARTBEAT_TIMEOUT``,
    ``PXLA_MP_SHUTDOWN_TIMEOUT``). Other ``jax_options`` go to jax unchanged
    (``local_device_ids``, ``coordinator_bind_address``, ...).
    ``end_all_on_failure=False`` leaves failures to jax alone.
    """
    _check_once()
    env = os.environ
    coordinator_address = coordinator_address or env.get(ENV_COORDINATOR) or None
    if num_processes is None:
        num_processes = env_int(ENV_NUM_PROCESSES, minimum=1, meaning="the number of processes of the run",
                                argument="num_processes")
    if process_id is None:
        process_id = env_int(ENV_PROCESS_ID, minimum=0, meaning="this process's index in 0..num_processes-1",
                             argument="process_id")
    if None in (coordinator_address, num_processes, process_id) and (found := cluster_launch()) is not None:
        # Under a cluster launcher (mpirun, srun): what jax would detect, so the run gets the same checks.
        coordinator_address = coordinator_address or found[0]
        num_processes = found[1] if num_processes is None else num_processes
        process_id = found[2] if process_id is None else process_id
    timeouts = Timeouts.resolve(initialization_timeout, heartbeat_timeout_seconds, shutdown_timeout_seconds)
    # (address, num_processes, process_id) when all three are known: the run pxla_mlir checks and links
    explicit = ((coordinator_address, num_processes, process_id) if coordinator_address is not None and
                num_processes is not None and process_id is not None else None)
    try:
        if explicit is not None:
            _check_arguments(*explicit)
        if cpu_devices is not None and (isinstance(cpu_devices, bool) or not isinstance(cpu_devices, int)
                                        or cpu_devices < 1):
            raise ValueError(f"cpu_devices={cpu_devices!r}: give this process's number of CPU devices, a "
                             f"positive int")
        if backends_are_initialized():
            raise RuntimeError("pxla_mlir.distributed.initialize must come before anything that starts jax's "
                               "backend (a computation, jax.devices(), jax.device_put, ...): move it to the start "
                               "of the program")
    except (ValueError, TypeError, RuntimeError) as e:
        if explicit is not None and explicit[2] != 0:  # process 0 is where the others would hear it: they time out instead
            rendezvous.report(*explicit, str(e), within_s=min(timeouts.init, 10.0))
        raise
    if cpu_devices is not None:
        jax.config.update("jax_num_cpu_devices", int(cpu_devices))
    if not faulthandler.is_enabled():
        faulthandler.enable()
    run_link, sockets = None, {}
    if explicit is not None and explicit[1] > 1:
        address, count, me = explicit
        sockets = rendezvous.join(address, count, me, timeout_s=timeouts.init,
                                  bind_address=jax_options.get("coordinator_bind_address"))
        if end_all_on_failure:
            run_link = link.Link(me, count, sockets, timeouts.shutdown)
            # Watching from here on: a process that dies while the others are in jax's connect ends them too.
            run_link.start()
    shutdown_s = timeouts.shutdown + (_JAX_SHUTDOWN_MARGIN_S if run_link is not None else 0)
    try:
        jax.distributed.initialize(coordinator_address, num_processes, process_id,
                                   initialization_timeout=math.ceil(timeouts.init),
                                   heartbeat_timeout_seconds=math.ceil(timeouts.heartbeat),
                                   shutdown_timeout_seconds=math.ceil(shutdown_s), **jax_options)
    except Exception as e:
        if run_link is not None:
            run_link.abandon(f"process {process_id} could not start jax.distributed: "
                             f"{(str(e).splitlines() or [''])[0][:300]}")
        raise
    if run_link is not None:
        run_link.jax_started = True
    else:
        for sock in sockets.values():  # joined; failures are jax's from here on
            sock.close()
    global _joined
    _joined = {"address": coordinator_address, "process": jax.process_index(), "count": jax.process_count()}


def shutdown() -> None:
    """Ends this process's part of the run: tells the others it ended its
    program, then ``jax.distributed.shutdown()`` (which waits for them).
    What a process does at exit anyway; call it instead of
    ``jax.distributed.shutdown()`` to end earlier."""
    run_link = link.current()
    if run_link is not None:
        run_link.bye()
    jax.distributed.shutdown()


def _check_once() -> None:
    if _joined is not None:
        raise RuntimeError(f"pxla_mlir.distributed.initialize was already called in this process (process "
                           f"{_joined['process']} of {_joined['count']}, coordinator {_joined['address']}): a process "
                           f"joins its run once, at the start; remove the second call")
    if jax.distributed.is_initialized():
        raise RuntimeError("jax.distributed.initialize was already called in this process: call "
                           "pxla_mlir.distributed.initialize instead of it (it starts jax.distributed itself), not "
                           "after it")


def _check_arguments(address, num_processes, process_id) -> None:
    rendezvous.split_address(address)
    for name, value in (("num_processes", num_processes), ("process_id", process_id)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r} of type {type(value).__name__}")
    if num_processes < 1:
        raise ValueError(f"num_processes={num_processes}: a run has at least one process")
    if not 0 <= process_id < num_processes:
        raise ValueError(f"process_id={process_id} is out of range for num_processes={num_processes}: give each "
                         f"process its own id in 0..{num_processes - 1} (process 0 hosts the coordinator)")
