"""One process of a run that cannot start (started by tests/distributed/test_multiprocess.py).

    MP_SCENARIO=<scenario> python tests/multiprocess/join_worker.py

What is wrong with process MP_VICTIM (default 1): ``bad_id`` (it says
process_id 2 of 2), ``unreachable`` (its coordinator address has nothing
listening), ``never`` (it never calls initialize), ``port_in_use``
(another socket holds the coordinator's port; process 0 only). Each process prints ``JOINED`` or
``JOIN FAILED <error type>: <message>`` and exits 0: an abort or a hang
shows as something else.
"""

import os
import socket
import sys
import time

import pxla_mlir
from pxla_mlir.distributed.launch import ENV_COORDINATOR, ENV_PROCESS_ID

SCENARIO = os.environ["MP_SCENARIO"]
ME = int(os.environ[ENV_PROCESS_ID])
VICTIM = int(os.environ.get("MP_VICTIM", "1"))
kwargs, held = {}, None
if ME == VICTIM:
    if SCENARIO == "never":
        time.sleep(float(os.environ.get("MP_SLEEP", "3600")))  # then ends without ever joining
        os._exit(0)
    if SCENARIO == "bad_id":
        kwargs["process_id"] = 2
    if SCENARIO == "unreachable":
        with socket.socket() as s:  # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            kwargs["coordinator_address"] = f"127.0.0.1:{s.getsockname()[1]}"
    if SCENARIO == "port_in_use":
        held = socket.create_server(("", int(os.environ[ENV_COORDINATOR].rsplit(":", 1)[1])))
try:
    pxla_mlir.distributed.initialize(**kwargs)
    print("JOINED", flush=True)
except Exception as e:
    print(f"JOIN FAILED {type(e).__name__}: {e}", flush=True)
    if held is not None:  # the other program keeps the port
        time.sleep(float(os.environ.get("MP_SLEEP", "0")))
    sys.stdout.flush()
    os._exit(0)  # without jax's exit handler (nothing to shut down)
