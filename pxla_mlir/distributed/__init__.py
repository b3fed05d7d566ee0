"""Multi-process runs: one pmap, xmap or ``pxla_mlir.jit`` program across the
processes of a ``jax.distributed`` run (gRPC coordination service; gloo
collectives on CPU, NCCL on GPU).

    pxla_mlir.distributed.initialize("127.0.0.1:1234", num_processes=2, process_id=i)
    f = pxla_mlir.pmap(step, "i")      # all global devices, process-major
    y = f(x_local)                     # x_local: this process's share of the mapped axis
    pxla_mlir.process_local(y)         # numpy: this process's part of the global result

* :mod:`.processes`: default devices and the check that a map covers every
  process evenly;
* :mod:`.shares`: a process's share of a global value (host inputs in,
  ``process_local`` out);
* :mod:`.jit_shares`: which ``pxla_mlir.jit`` arguments are shares (a probe
  of its body's maps), and their global values;
* :mod:`.program_check`: the same program on every process, checked before
  the first launch;
* :mod:`.lifecycle`: ``initialize`` and ``shutdown``;
* :mod:`.rendezvous`: every process joins through process 0 before jax
  starts, so that a run that cannot start is an error on every process;
* :mod:`.link`: the join's connections, kept open, end every process when
  one fails, dies or ends early;
* :mod:`.settings`: the run's timeouts (arguments, ``PXLA_MP_*`` variables);
* :mod:`.launch`: N local processes on a free 127.0.0.1 port.
"""

from typing import TYPE_CHECKING

from pxla_mlir.distributed.launch import Finished, launch  # jax-free: launching processes needs no jax

if TYPE_CHECKING:  # what _LAZY loads, for type checkers (tests/distributed/test_lazy_names.py keeps the two equal)
    from pxla_mlir.distributed.jit_shares import JitShareError
    from pxla_mlir.distributed.lifecycle import PEER_FAILED_EXIT, initialize, shutdown
    from pxla_mlir.distributed.processes import (
        MultiProcessError,
        check_devices,
        default_devices,
        is_multi_process,
        spans_processes,
    )
    from pxla_mlir.distributed.program_check import ProgramMismatchError, check_before_launch
    from pxla_mlir.distributed.rendezvous import JoinError
    from pxla_mlir.distributed.shares import (
        LocalPlacement,
        bound_avals,
        global_avals,
        is_global,
        is_process_local,
        process_local,
        share_note,
    )

# The rest is loaded on first use (it needs jax).
_LAZY = {"initialize": "lifecycle", "shutdown": "lifecycle", "PEER_FAILED_EXIT": "lifecycle", "JoinError": "rendezvous",
         "MultiProcessError": "processes", "check_devices": "processes", "default_devices": "processes",
         "is_multi_process": "processes", "spans_processes": "processes", "ProgramMismatchError": "program_check",
         "check_before_launch": "program_check", "LocalPlacement": "shares", "bound_avals": "shares",
         "global_avals": "shares", "is_global": "shares", "is_process_local": "shares", "process_local": "shares",
         "share_note": "shares", "JitShareError": "jit_shares"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["launch", "Finished", "initialize", "shutdown", "PEER_FAILED_EXIT", "JoinError", "MultiProcessError",
           "check_devices", "default_devices", "is_multi_process", "spans_processes", "ProgramMismatchError",
           "check_before_launch", "LocalPlacement", "bound_avals", "global_avals", "is_global", "is_process_local",
           "process_local", "share_note", "JitShareError"]
