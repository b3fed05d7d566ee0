"""The example pass plugins (examples/plugins/) on modules real maps produce: the rewrite computes the same
values, bit for bit, and the report counts what the collectives move."""

import json

import jax
import numpy as np
import pytest
from jaxlib.mlir import ir

import pxla_mlir
from pxla_mlir.examples.plugins.collective_bytes import CollectiveBytesPass
from pxla_mlir.examples.plugins.unshard_as_all_gather import UnshardAsAllGatherPass
from pxla_mlir.mlir.core.context import make_context
from pxla_mlir.mlir.core.diagnostics import DiagnosticCollector
from pxla_mlir.mlir.pass_infra import Pipeline, run_pipeline
from pxla_mlir.mlir.pass_infra.registry import REGISTRY


@pytest.fixture(autouse=True)
def registered():
    with REGISTRY.restored_after():
        for cls in (UnshardAsAllGatherPass, CollectiveBytesPass):
            REGISTRY.add(cls, cls.__module__)
        yield


def run_passes(text: str, pipeline: str) -> tuple[str, list]:
    """The module after ``pipeline``, and the diagnostics (remarks included) it emitted."""
    ctx = make_context()
    with ctx, DiagnosticCollector(ctx) as diags:
        module = ir.Module.parse(text)
        Pipeline.parse(pipeline, ctx).pass_manager(ctx).run(module.operation)
        return str(module), diags.diagnostics


def nested(inner_out_axes=0):
    """A pmap over i=2 of a pmap over j=4 whose gathered output the outer body reverses: a real unshard, and
    only data movement after it (every bit of the gathered values reaches the output, in a checked order)."""
    def outer(x):
        y = pxla_mlir.pmap(lambda v: v * 2, "j", out_axes=inner_out_axes)(x)
        return y[::-1] if inner_out_axes == 0 else y[:, ::-1]
    return outer


def bits(a) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.kind == "f" else a


@pytest.mark.parametrize("mode", ["replica", "partition"])
@pytest.mark.parametrize("dtype,out_axes", [(np.int32, 0), (np.float32, 0), (np.float32, 1), (np.int8, 1)])
def test_the_rewrite_gives_the_all_reduce_unshards_values_bit_for_bit(mode, dtype, out_axes):
    f = pxla_mlir.pmap(nested(out_axes), "i", mode=mode, unshard="all-reduce")
    x = (np.arange(2 * 4 * 3 * 5) - 50).reshape(2, 4, 3, 5).astype(dtype)
    if dtype == np.float32:
        x[0, 1, 0] = -0.0  # signed zeros and a denormal cross the unshard unchanged
        x[1, 2, 1, :2] = [0.0, 1e-40]
    before = f.lower(x).as_text()
    after, diags = run_passes(before, "builtin.module(unshard-as-all-gather)")
    assert before.count('"mhlo.all_reduce"') == 1 and '"mhlo.all_gather"' not in before
    assert '"mhlo.all_reduce"' not in after and after.count('"mhlo.all_gather"') == 1
    assert "dynamic_update_slice" not in after and "replica_id" not in after and "partition_id" not in after
    assert not diags
    got = pxla_mlir.load(after).compile()(x)[0]
    want = f(x)
    np.testing.assert_array_equal(bits(got), bits(want))


def test_signed_zeros_survive_pxlas_own_form():
    """pxla sums floats as their bits, so its all-reduce unshard keeps a -0.0: the all_gather does too."""
    f = pxla_mlir.pmap(nested(0), "i", unshard="all-reduce")
    x = np.full((2, 4, 3), -0.0, np.float32)
    x[:, ::2] = 0.0
    after, _ = run_passes(f.lower(x).as_text(), "builtin.module(unshard-as-all-gather)")
    got = np.asarray(pxla_mlir.load(after).compile()(x)[0])
    np.testing.assert_array_equal(bits(got), bits(f(x)))
    assert np.signbit(got).sum() == 12  # half the values are -0.0, after the gather as before


# 2022's spelling: the piece is summed as a float (4 replicas, groups of 2: axis j of i=2, j=2).
FLOAT_SUM = """
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%v: tensor<3xf32>) -> tensor<2x3xf32> {
    %z = mhlo.constant dense<0.000000e+00> : tensor<2x3xf32>
    %u = mhlo.reshape %v : (tensor<3xf32>) -> tensor<1x3xf32>
    %r = mhlo.replica_id : tensor<ui32>
    %c2 = mhlo.constant dense<2> : tensor<ui32>
    %m = mhlo.remainder %r, %c2 : tensor<ui32>
    %i = mhlo.convert %m : (tensor<ui32>) -> tensor<i32>
    %c0 = mhlo.constant dense<0> : tensor<i32>
    %p = mhlo.dynamic_update_slice %z, %u, %i, %c0 : (tensor<2x3xf32>, tensor<1x3xf32>, tensor<i32>, tensor<i32>) -> tensor<2x3xf32>
    %s = "mhlo.all_reduce"(%p) <{replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %t = mhlo.add %a, %b : tensor<f32>
      mhlo.return %t : tensor<f32>
    }) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    return %s : tensor<2x3xf32>
  }
}
"""


@pytest.mark.parametrize("float_sums", ["as-sum", "gather"])
def test_float_sums_keep_the_sums_signed_zeros_or_each_devices_own(float_sums):
    # One device's program, stacked on a leading device axis: the module records no layout.
    v = np.array([[-0.0, 1.5, -2.0], [0.0, -0.0, 3.0], [-0.0, -0.0, -0.0], [7.0, 0.0, -1e-40]], np.float32)
    want = np.asarray(pxla_mlir.load(FLOAT_SUM).compile()(v)[0])
    assert not np.signbit(want[want == 0]).any()  # the float sum makes every -0.0 a +0.0
    after, _ = run_passes(FLOAT_SUM, f"builtin.module(unshard-as-all-gather{{float-sums={float_sums}}})")
    assert '"mhlo.all_gather"' in after and '"mhlo.all_reduce"' not in after
    got = np.asarray(pxla_mlir.load(after).compile()(v)[0])
    if float_sums == "as-sum":
        np.testing.assert_array_equal(bits(got), bits(want))
    else:  # each device's own value: -0.0 stays
        np.testing.assert_array_equal(bits(got), bits(np.stack([v[0:2], v[0:2], v[2:4], v[2:4]])))
        assert np.signbit(got[0, 0, 0]) and not np.signbit(want[0, 0, 0])


@pytest.mark.parametrize("old,new,why", [
    ("mhlo.remainder %r", "mhlo.divide %r", "device 1 (replica 1, partition 0) writes at index 0 of dimension 0, "
                                            "but its place in its group is 1"),
    ("dense<0.000000e+00> : tensor<2x3xf32>", "dense<1.000000e+00> : tensor<2x3xf32>", "not zeros"),
    ("mhlo.add %a, %b", "mhlo.maximum %a, %b", "its reduction is not a single add"),
    ("dense<[[0, 1], [2, 3]]>", "dense<[[1, 0], [2, 3]]>", "device 1 (replica 1, partition 0) writes at index 1"),
    ("dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>", "dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>", "make 4, not the 2"),
    ("%u, %i, %c0", "%u, %i, %i", "device 1 (replica 1, partition 0) writes at index 1 of dimension 1, not 0"),
])
def test_near_misses_are_left_alone_with_a_remark(old, new, why):
    assert FLOAT_SUM.count(old) == 1
    after, diags = run_passes(FLOAT_SUM.replace(old, new), "builtin.module(unshard-as-all-gather)")
    assert '"mhlo.all_reduce"' in after and '"mhlo.all_gather"' not in after
    assert [d.severity for d in diags] == ["remark"] and why in diags[0].message, diags


def test_float_sums_keep_leaves_them_and_a_psum_is_never_touched():
    after, diags = run_passes(FLOAT_SUM, "builtin.module(unshard-as-all-gather{float-sums=keep})")
    assert '"mhlo.all_reduce"' in after and "float-sums=keep" in diags[0].message
    text = pxla_mlir.pmap(lambda v: jax.lax.psum(v, "i"), "i").lower(np.ones((8, 2), np.float32)).as_text()
    after, diags = run_passes(text, "builtin.module(unshard-as-all-gather)")
    assert after.count('"mhlo.all_reduce"') == 1 and not diags


def test_collective_bytes_on_a_nested_pmap(tmp_path):
    f = pxla_mlir.pmap(nested(0), "i", unshard="all-reduce")
    x = np.zeros((2, 4, 3, 5), np.float32)
    text = f.lower(x).as_text()
    out = tmp_path / "bytes.json"
    before, diags = run_passes(text, f"builtin.module(collective-bytes{{json={out}}})")
    after, diags_after = run_passes(text, f"builtin.module(unshard-as-all-gather,collective-bytes{{json={out}2}})")
    assert before == run_passes(text, "builtin.module()")[0]  # a report changes nothing
    # The all-reduce sends 2 (n-1)/n of the whole 4x3x5 i32 array per device; the all_gather (n-1) pieces.
    assert [d.severity for d in diags] == ["remark"]
    assert diags[0].message == ("all_reduce: 2 groups of 4 devices; per device 240 B in, 240 B out, 360 B sent "
                                "(ring: 2(n-1)/n * in); 2880 B sent in all")
    assert diags_after[0].message == ("all_gather: 2 groups of 4 devices; per device 60 B in, 240 B out, 180 B sent "
                                      "(ring: (n-1) * in); 1440 B sent in all")
    report = json.loads(out.read_text())
    (op,) = report["ops"]
    assert op["groups"] == [[0, 1, 2, 3], [4, 5, 6, 7]] and op["mode"] == "cross-replica"
    assert report["totals"]["bytes_sent_total"] == 2880
    assert report["totals"]["by_groups"] == {"[[0,1,2,3],[4,5,6,7]]": {"ops": 1, "bytes_sent_total": 2880}}
    assert json.loads((tmp_path / "bytes.json2").read_text())["totals"]["by_op"]["all_gather"]["bytes_sent_total"] \
        == 1440


def test_collective_bytes_reports_an_unwritable_json_path(tmp_path):
    ctx = make_context()
    with ctx:
        module = ir.Module.parse(FLOAT_SUM)
        with pytest.raises(Exception, match=r"collective-bytes cannot write json=.*: .*give a writable path"):
            run_pipeline(module, f"builtin.module(collective-bytes{{json={tmp_path}}})", reproducer=False)
