"""The multi-process machinery's pieces that need no second process: a
process's share of a global value, what counts as process-local, the program
records compared before a launch, and single-process runs left unchanged."""

import jax
import numpy as np
import pytest

import pxla_mlir
from pxla_mlir.distributed import MultiProcessError, check_devices, global_avals, is_process_local
from pxla_mlir.distributed.program_check import check_before_launch, describe_difference
from pxla_mlir.distributed.shares import Share, bound_avals
from pxla_mlir.mlir.sharding import Mesh
from pxla_mlir.pmaps.arguments import plain_aval


def rows(*starts, width=1):
    return [(slice(s, s + width), slice(0, 3)) for s in starts]


@pytest.mark.parametrize("indices, shape, local", [
    (rows(4, 5, 6, 7), (4, 3), [0, 1, 2, 3]),  # process-major block
    (rows(1, 3, 5, 7), (4, 3), [0, 1, 2, 3]),  # interleaved devices: rows 1, 3, 5, 7 in order
    (rows(6, 2), (2, 3), [1, 0]),  # pieces in device order, share in global order
    (rows(0, 0, 4, 4), (2, 3), [0, 0, 1, 1]),  # replicated pieces (nested pmaps) share a row
    (rows(2, 6, width=2), (4, 3), [0, 2]),
])
def test_share_of_rows(indices, shape, local):
    share = Share.of((8, 3), indices)
    assert share.shape == shape
    assert [ix[0].start for ix in share.local_index] == local


def test_share_of_tiles_and_replicated_values():
    tiles = [(slice(0, 2), slice(4, 6)), (slice(0, 2), slice(6, 8)), (slice(2, 4), slice(4, 6)),
             (slice(2, 4), slice(6, 8))]
    share = Share.of((4, 8), tiles)
    assert share.shape == (4, 4)
    assert [(ix[0].start, ix[1].start) for ix in share.local_index] == [(0, 0), (0, 2), (2, 0), (2, 2)]
    whole = Share.of((5, 3), [(slice(None), slice(None))] * 4)
    assert whole.shape == (5, 3) and whole.local_index[0] == (slice(0, 5), slice(0, 3))
    assert Share.of((), [(), ()]).shape == ()


def test_share_refuses_pieces_that_are_not_one_block():
    with pytest.raises(MultiProcessError, match="overlap along dimension 0"):
        Share.of((8,), [(slice(0, 4),), (slice(2, 6),)])
    with pytest.raises(MultiProcessError, match="leave holes"):
        Share.of((4, 4), [(slice(0, 2), slice(0, 2)), (slice(2, 4), slice(2, 4))])


def test_single_process_runs_are_unchanged():
    x = np.ones((8, 3), np.float32)
    avals = [plain_aval(x)]
    assert global_avals([x], avals, [0]) == avals
    assert bound_avals([x], [0], 8) == tuple(avals)
    devices = jax.devices()[:3]
    assert check_devices(devices, "pmap 'f'") == devices
    f = pxla_mlir.pmap(lambda v: jax.lax.psum(v, "i"), "i")
    assert check_before_launch(f.lower(x)) is None
    y = f(x)
    np.testing.assert_array_equal(pxla_mlir.process_local({"y": y})["y"], np.asarray(y))


def test_a_mesh_of_real_devices_in_one_process_is_its_own_local_mesh():
    m = Mesh.create({"x": 2, "y": 4})
    assert not m.is_multi_process and m.local_mesh == m
    assert len(m.local_devices) == 8 and m.devices.flat[0] == jax.devices()[0]


def test_traced_values_keep_their_locality():
    seen = []

    def probe(v):
        seen.append(is_process_local(v))
        return v

    x = np.ones((4, 3), np.float32)
    jax.vmap(probe)(x)  # batched host value: still this process's
    jax.jvp(probe, (x,), (x,))
    jax.jit(probe)(x)  # staged: no concrete value, global
    assert seen == [True, True, False]
    assert is_process_local(x) and is_process_local(jax.numpy.ones(3))


def test_program_records_name_their_difference():
    mine = {"name": "pmap_f", "devices": [0, 1, 2048, 2049], "sha256": "a" * 64, "text": "module {\n  %0 = add\n}"}
    assert describe_difference(mine, dict(mine), 0, 1) == ""
    theirs = {**mine, "name": "pmap_g", "devices": [0, 2048, 1, 2049], "sha256": "b" * 64,
              "text": "module {\n  %0 = sub\n}"}
    text = describe_difference(mine, theirs, 0, 1)
    assert "'pmap_f' here, 'pmap_g' on process 1" in text
    assert "device order [0, 1, 2048, 2049] here, [0, 2048, 1, 2049] on process 1" in text
    assert "-  %0 = add\n+  %0 = sub" in text
    assert "sha256 aaaaaaaaaaaa here" in describe_difference(mine, {**theirs, "text": None}, 0, 1)
    shares = describe_difference({**mine, "inputs": ["f32[8,3]", "f32[]"]}, {**mine, "inputs": ["f32[16,3]", "f32[]"]},
                                 0, 1)
    assert shares.startswith("the global shapes of the inputs differ (input 0: f32[8,3] here, f32[16,3] on process "
                             "1). A host input to a map is this process's share")


class FakeClient:
    """The key-value store of a coordination service: what process 0 writes, process 1 writes too, through
    ``theirs(kind, value)`` (kind "fingerprint" or "record"); ``theirs`` None: process 1 never writes."""

    def __init__(self, theirs):
        self.store, self.theirs = {}, theirs

    def key_value_set(self, key, value, allow_overwrite=False):
        self.store[key] = value
        parts = key.split("/")
        if self.theirs is None:
            return
        if parts[2] == "mismatch" and parts[-1] == "0":  # .../mismatch/<n>/<process>
            self.store["/".join(parts[:-1] + ["1"])] = self.theirs("record", value)
        elif parts[2] == "0":  # .../<process>/<block>/<n>
            self.store["/".join(parts[:2] + ["1"] + parts[3:])] = self.theirs("fingerprint", value)

    def blocking_key_value_get(self, key, timeout_in_ms):
        if key not in self.store:
            raise RuntimeError(f"DEADLINE_EXCEEDED: {key} not found within {timeout_in_ms} ms")
        return self.store[key]


_LIVE: list = []


def _agreement_with(monkeypatch, theirs):
    from pxla_mlir.distributed import program_check as pc

    x = np.ones((8, 3), np.float32)
    lowered = pxla_mlir.pmap(lambda v: jax.lax.psum(v, "i"), "i").lower(x)
    _LIVE.append(lowered)  # an agreement prints its module only for a mismatch, while the lowering lives
    agreement = pc.LaunchAgreement(lowered)
    client = FakeClient(theirs)
    monkeypatch.setattr(pc, "distributed_client", lambda: client)
    monkeypatch.setattr(pc.jax, "process_count", lambda: 2)
    monkeypatch.setattr(pc, "CHECK_TIMEOUT_S", 0.01)
    return agreement, client


def test_every_launch_is_agreed_for_the_same_program(monkeypatch):
    agreement, client = _agreement_with(monkeypatch, lambda kind, value: value)
    launched = []
    assert agreement(lambda: launched.append(1) or "out") == "out"
    assert agreement(lambda: launched.append(2) or "out") == "out"
    assert launched == [1, 2]
    assert len(client.store) == 4  # a fingerprint per process per launch, no records


def test_a_different_program_is_named_and_nothing_is_launched(monkeypatch):
    import json

    from pxla_mlir.distributed import ProgramMismatchError

    differ = [True]

    def theirs(kind, value):
        if kind == "fingerprint":
            return "other" if differ[0] else value
        record = json.loads(value)
        return json.dumps({**record, "text": record["text"].replace("psum", "x"), "sha256": "0"})

    agreement, _ = _agreement_with(monkeypatch, theirs)
    launched = []
    with pytest.raises(ProgramMismatchError, match="(?s)about to launch different programs as their multi-process "
                                                   "launch #\\d+: .*the MHLO differs.*Nothing was launched"):
        agreement(lambda: launched.append(1))
    assert launched == []
    differ[0] = False  # the next launch is agreed anew: the run stays usable
    agreement(lambda: launched.append(2))
    assert launched == [2]


def test_a_process_that_never_reaches_the_launch_times_out_with_a_message(monkeypatch):
    from pxla_mlir.distributed import ProgramMismatchError

    agreement, _ = _agreement_with(monkeypatch, None)
    with pytest.raises(ProgramMismatchError, match="process 1 did not reach its launch #\\d+ .* within 0.01 s"):
        agreement(lambda: None)


# -- starting a run: checked before anything starts ---------------------------------------------------

def test_settings_that_cannot_work_are_refused_before_anything_starts(monkeypatch):
    from pxla_mlir.distributed import initialize

    monkeypatch.setenv("PXLA_MP_NUM_PROCESSES", "two")
    with pytest.raises(ValueError, match=r"^environment variable PXLA_MP_NUM_PROCESSES='two' is not an integer: "
                                         r"set it to the number of processes of the run .* pass num_processes="):
        initialize()
    monkeypatch.setenv("PXLA_MP_NUM_PROCESSES", "2")
    monkeypatch.setenv("PXLA_MP_PROCESS_ID", "-1")
    with pytest.raises(ValueError, match=r"PXLA_MP_PROCESS_ID=-1 must be at least 0"):
        initialize()
    monkeypatch.delenv("PXLA_MP_PROCESS_ID")
    monkeypatch.setenv("PXLA_MP_SHUTDOWN_TIMEOUT", "soon")
    with pytest.raises(ValueError, match=r"environment variable PXLA_MP_SHUTDOWN_TIMEOUT='soon' is not a timeout"):
        initialize()
    monkeypatch.delenv("PXLA_MP_SHUTDOWN_TIMEOUT")
    with pytest.raises(ValueError, match=r"^initialization_timeout=0 is not a timeout: give a positive number"):
        initialize(initialization_timeout=0)
    for address, why in [("127.0.0.1", "is not 'host:port'"), ("h:0", "port '0' is not a number between 1"),
                         ("h:port", "port 'port' is not a number")]:
        with pytest.raises(ValueError, match=why):
            initialize(address, 2, 0, initialization_timeout=0.1)
    with pytest.raises(ValueError, match=r"process_id=2 is out of range for num_processes=2: give each process "
                                         r"its own id in 0\.\.1"):
        initialize("127.0.0.1:1", 2, 2, initialization_timeout=0.1)
    with pytest.raises(TypeError, match="num_processes must be an int, got '2'"):
        initialize("127.0.0.1:1", "2", 0, initialization_timeout=0.1)
    with pytest.raises(RuntimeError, match="must come before anything that starts jax's backend"):
        initialize("127.0.0.1:1", 2, 1, initialization_timeout=0.1)  # this test process has used jax


def test_initialize_twice_says_so(monkeypatch):
    from pxla_mlir.distributed import initialize, lifecycle

    monkeypatch.setattr(lifecycle, "_joined", {"address": "127.0.0.1:1234", "process": 1, "count": 2})
    with pytest.raises(RuntimeError, match=r"already called in this process \(process 1 of 2, coordinator "
                                           r"127.0.0.1:1234\): .* remove the second call"):
        initialize()
    monkeypatch.setattr(lifecycle, "_joined", None)
    monkeypatch.setattr(lifecycle.jax.distributed, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match="jax.distributed.initialize was already called in this process: call "
                                           "pxla_mlir.distributed.initialize instead of it"):
        initialize()


def _join_all(address, hellos, n=2, timeout_s=5.0):
    """Process 0's join, with the other processes' hellos sent from threads; its error text (or None)."""
    import socket
    import threading

    from pxla_mlir.distributed import rendezvous

    def check_in(hello):
        for _ in range(50):
            try:
                with socket.create_connection(address, timeout=2) as s:
                    rendezvous.send(s, hello) if isinstance(hello, dict) else s.sendall(hello)
                    s.recv(4096)
                return
            except OSError:
                import time

                time.sleep(0.05)

    threads = [threading.Thread(target=check_in, args=(h,), daemon=True) for h in hellos]
    for t in threads:
        t.start()
    try:
        sockets = rendezvous.join(f"{address[0]}:{address[1]}", n, 0, timeout_s=timeout_s)
    except rendezvous.JoinError as e:
        return str(e)
    finally:
        for t in threads:
            t.join(5)
    for s in sockets.values():
        s.close()
    return None


@pytest.mark.parametrize("hellos, why", [
    ([{"process_id": 1, "num_processes": 2}], None),
    ([{"process_id": 1, "num_processes": 3}], "process 1 (pid None on None) was started with num_processes=3, "
                                              "process 0 with num_processes=2"),
    ([{"process_id": 0, "num_processes": 2}], "has process_id=0, but the run's process ids are 0..1"),
    ([{"process_id": 1, "num_processes": 3, "pid": 7}, {"process_id": 1, "num_processes": 3, "pid": 8}],
     "two processes have process_id=1"),
    ([b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"], "without checking in: it called jax.distributed.initialize itself"),
    ([{"process_id": 1, "num_processes": 2, "error": "bad arguments"}], "process 1 (pid None on None) cannot join "
                                                                        "the run: bad arguments"),
    ([], "process 0 waited 0.5 s at 127.0.0.1:"),
], ids=["joins", "other_count", "id_zero", "same_id", "plain_jax", "reported", "nobody"])
def test_the_join_names_what_is_wrong(hellos, why):
    from pxla_mlir.distributed.launch import free_port

    n = 3 if len(hellos) == 2 else 2
    got = _join_all(("127.0.0.1", free_port()), hellos, n=n, timeout_s=0.5 if not hellos else 5.0)
    assert (got is None) if why is None else (got is not None and why in got), got


def test_a_process_that_cannot_reach_the_coordinator_says_where():
    from pxla_mlir.distributed import rendezvous
    from pxla_mlir.distributed.launch import free_port

    port = free_port()
    with pytest.raises(rendezvous.JoinError, match=rf"process 1 could not reach the run's coordinator \(process 0\) "
                                                   rf"at 127.0.0.1:{port} within 0.3 s \(Connection refused\)"):
        rendezvous.join(f"127.0.0.1:{port}", 2, 1, timeout_s=0.3)
