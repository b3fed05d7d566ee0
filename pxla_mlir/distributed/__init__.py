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

from .launch import Finished, launch
from .lifecycle import PEER_FAILED_EXIT, initialize, shutdown
from .processes import MultiProcessError, check_devices, default_devices, is_multi_process, spans_processes
from .program_check import ProgramMismatchError, check_before_launch
from .rendezvous import JoinError
from .shares import (LocalPlacement, bound_avals, global_avals, is_global, is_process_local, process_local,
                     share_note)

__all__ = ["initialize", "shutdown", "process_local", "launch", "Finished", "MultiProcessError", "JoinError",
           "ProgramMismatchError",
           "PEER_FAILED_EXIT", "is_multi_process", "spans_processes", "default_devices", "check_devices",
           "check_before_launch", "LocalPlacement", "bound_avals", "global_avals", "is_global", "is_process_local",
           "share_note"]
