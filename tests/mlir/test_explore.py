"""The explore page's jax-free parts: bytes and device groups by hand, stage
diffs, the HTML's escaping and the headless browser's evaluate. The page of
lowered programs, its command line and the page in a browser are
tests/tools/test_explore_page.py."""

import html

import pytest

# -- bytes and groups, by hand ----------------------------------------------------------------------

def test_element_bytes():
    from pxla_mlir.mlir.explore.traffic import element_bytes

    assert [element_bytes(t) for t in ("f32", "bf16", "f16", "f64", "i1", "i8", "ui32", "i64", "complex<f32>")] == \
        [4, 2, 2, 8, 1, 1, 4, 8, 8]
    with pytest.raises(ValueError):
        element_bytes("token")


@pytest.mark.parametrize("mode, groups, R, P, want", [
    ("cross-replica", [[0, 1, 2, 3], [4, 5, 6, 7]], 8, 1, ((0, 1, 2, 3), (4, 5, 6, 7))),
    # 2 replicas x 4 partitions: a replica group repeats in each partition, device = r * 4 + p
    ("cross-replica", [[0, 1]], 2, 4, ((0, 4), (1, 5), (2, 6), (3, 7))),
    ("cross-partition", [[0, 1], [2, 3]], 2, 4, ((0, 1), (2, 3), (4, 5), (6, 7))),
    ("cross-replica-and-partition", [[0, 1]], 2, 2, ((0, 1, 2, 3),)),
    ("flattened-id", [[0, 5], [1, 4]], 2, 4, ((0, 5), (1, 4))),
    ("cross-replica", [], 4, 1, ((0, 1, 2, 3),)),  # no groups: one group of everybody
])
def test_device_groups(mode, groups, R, P, want):
    from pxla_mlir.mlir.core.device_groups import device_indices

    assert device_indices(mode, groups, R, P) == want


def test_permute_pairs_in_partition_mode_repeat_per_replica():
    from pxla_mlir.mlir.core.device_groups import permute_pairs

    assert permute_pairs("cross-partition", [[0, 1], [1, 0]], 2, 2) == ((0, 1), (1, 0), (2, 3), (3, 2))


@pytest.mark.parametrize("op, groups, operand, result, want", [
    # ring all-reduce: 2 (g-1)/g of the operand; f32[128] = 512 B in groups of 4 -> 768 B
    ("all_reduce", ((0, 1, 2, 3), (4, 5, 6, 7)), 512, 512, [768] * 8),
    ("all_reduce", ((0, 4), (1, 5), (2, 6), (3, 7)), 512, 512, [512] * 8),
    # all-gather: (g-1)/g of the gathered result = (g-1) x the operand
    ("all_gather", ((0, 1, 2, 3), (4, 5, 6, 7)), 512, 2048, [1536] * 8),
    ("reduce_scatter", ((0, 1, 2, 3),), 2048, 512, [1536] * 4),
    ("all_to_all", ((0, 1), (2, 3)), 1024, 1024, [512] * 4),
    # a permute source sends its operand once; device 3 is nobody's source
    ("collective_permute", ((0, 1), (1, 2), (2, 0)), 100, 100, [100, 100, 100, 0]),
    ("collective_broadcast", ((0, 1, 2),), 64, 64, [64, 64, 0]),
    ("all_reduce", ((0,), (1,)), 512, 512, [0, 0]),  # a group of one sends nothing
    ("all_reduce", ((0, 1),), 512, 512, [512, 512, 0]),  # device 2 takes no part
])
def test_bytes_sent_by_hand(op, groups, operand, result, want):
    from pxla_mlir.mlir.explore.traffic import bytes_sent

    assert list(bytes_sent(op, groups, operand, result, len(want))) == want


# -- stage diffs ---------------------------------------------------------------------------------------

BEFORE = """module {
  func.func @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = mhlo.add %arg0, %arg0 : tensor<4xf32>
    %1 = mhlo.multiply %0, %0 : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
"""
AFTER = """module {
  func.func @f(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = mhlo.constant dense<1.000000e+00> : tensor<4xf32>
    %1 = mhlo.add %arg0, %arg0 : tensor<4xf32>
    %2 = mhlo.multiply %1, %1 : tensor<4xf32>
    return %2 : tensor<4xf32>
  }
}
"""


def test_line_diff_ignores_ssa_renumbering():
    from pxla_mlir.mlir.explore.linediff import diff_ops

    ops = diff_ops(BEFORE, AFTER)
    assert [(op, line.strip()) for op, line in ops if op != " "] == \
        [("+", "%0 = mhlo.constant dense<1.000000e+00> : tensor<4xf32>")]
    assert [line for op, line in ops if op != "-"] == AFTER.splitlines()  # shown as printed


def test_line_diff_of_text_that_is_not_mlir():
    from pxla_mlir.mlir.explore.linediff import diff_ops

    assert diff_ops("a\nb\n", "a\nc\n") == [(" ", "a"), ("-", "b"), ("+", "c")]


# -- the HTML -------------------------------------------------------------------------------------------

def test_ir_text_is_escaped():
    from pxla_mlir.mlir.explore.model import MeshView, Page, Stage
    from pxla_mlir.mlir.explore.render import render

    evil = 'x = "</pre><script>alert(1)</script>" & <y>'
    stages = (Stage("jaxpr", "jaxpr", "jaxpr", evil), Stage("pxla", "import", "mlir", evil),
              Stage("p", "pass", "mlir", evil + "!", seconds=0.0, changed=True, diff=(("-", evil), ("+", evil + "!"))),
              Stage("mhlo", "final", "mlir", evil), Stage("xla", "xla", "hlo", None, note="(not compiled)"))
    page = Page("t<&>", "builtin.module(p)", 1, 1, MeshView(("devices",), (1,)), stages, (), (), (), ())
    out = render(page)
    assert "<script>alert" not in out and "</pre><script>" not in out
    assert html.escape(evil, quote=False) in out and "t&lt;&amp;&gt;" in out


# -- a real browser -----------------------------------------------------------------------------------

def _chromium():
    from pxla_mlir.mlir.explore.browser import find_chromium

    path = find_chromium()
    if path is None:
        pytest.skip("headless Chromium not found: install Debian's 'chromium' package (.ci/run does, as root)")
    return path


@pytest.mark.browser
def test_evaluate_returns_the_value_or_the_error(tmp_path):
    _chromium()
    from pxla_mlir.mlir.explore.browser import BrowserError, evaluate

    page = tmp_path / "tiny.html"
    page.write_text('<!DOCTYPE html><html><body style="margin:0"><div style="width:3000px">wide</div></body></html>')
    assert evaluate(page, "[window.innerWidth, document.documentElement.scrollWidth, '</script>']", (1000, 600)) == \
        [1000, 3000, "</script>"]
    with pytest.raises(BrowserError, match="nope"):
        evaluate(page, "(function () { throw new Error('nope'); })()")
