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
    """The key-value store of a coordination service, with process 1's entries given."""

    def __init__(self, theirs):
        self.store, self.theirs = {}, theirs

    def key_value_set(self, key, value, allow_overwrite=False):
        self.store[key] = value
        if key.endswith("/0") and self.theirs is not None:
            self.store[key[:-1] + "1"] = self.theirs(value)

    def blocking_key_value_get(self, key, timeout_in_ms):
        if key not in self.store:
            raise RuntimeError(f"DEADLINE_EXCEEDED: {key} not found within {timeout_in_ms} ms")
        return self.store[key]


def _check_with(monkeypatch, theirs):
    import json

    from pxla_mlir.distributed import program_check as pc

    x = np.ones((8, 3), np.float32)
    check = pc.ProgramCheck(pxla_mlir.pmap(lambda v: jax.lax.psum(v, "i"), "i").lower(x))
    client = FakeClient(None if theirs is None else lambda mine: json.dumps(theirs(json.loads(mine))))
    monkeypatch.setattr(pc, "distributed_client", lambda: client)
    monkeypatch.setattr(pc.jax, "process_count", lambda: 2)
    monkeypatch.setattr(pc, "CHECK_TIMEOUT_S", 0.01)
    return check, client


def test_program_check_passes_for_the_same_program(monkeypatch):
    check, client = _check_with(monkeypatch, lambda record: record)
    check()
    check()  # once only
    assert len(client.store) == 2


def test_program_check_names_the_difference_and_stays_failed(monkeypatch):
    from pxla_mlir.distributed import ProgramMismatchError

    check, client = _check_with(monkeypatch, lambda r: {**r, "text": r["text"].replace("psum", "x"), "sha256": "0"})
    with pytest.raises(ProgramMismatchError, match="(?s)about to launch different programs.*the MHLO differs"):
        check()
    with pytest.raises(ProgramMismatchError):  # the same error again, no new exchange
        check()
    assert len(client.store) == 2


def test_program_check_times_out_with_a_message(monkeypatch):
    from pxla_mlir.distributed import ProgramMismatchError

    check, _ = _check_with(monkeypatch, None)
    with pytest.raises(ProgramMismatchError, match="process 1 did not reach its launch #\\d+ .* within 0.01 s"):
        check()
