"""pxla-mlir explore: the page model of lowered programs against
hand-computed values, the HTML, the command line, and the page in a real
(headless) browser. (The page's jax-free parts: tests/mlir/test_explore.py.)"""

import os
import re
import subprocess
import sys

import pytest
from conftest import REPO

NESTED = str(REPO / "examples/nested_reduction.py") + ":two_level_sum"
TRAIN = str(REPO / "examples/train_step.py") + ":train_step"
XMAP = str(REPO / "examples/xmap_2d.py") + ":normalise_2d"
NESTED_PASSES = ["pxla-verify-form", "chlo-legalize-to-hlo", "stablehlo-legalize-to-hlo", "pxla-fold-shard-of-unshard",
                 "pxla-expand-shard", "pxla-expand-unshard", "pxla-convert-to-replica-mode", "pxla-annotate-shardings",
                 "pxla-elide-trivial-collectives", "canonicalize", "cse", "symbol-dce", "pxla-verify-handoff"]


def lower(target, **options):
    from pxla_mlir.tools.emit import MapOptions, lower_target

    return lower_target(target, MapOptions(**options))


@pytest.fixture(scope="module")
def nested():
    return lower(NESTED)


@pytest.fixture(scope="module")
def nested_page(nested):
    from pxla_mlir.mlir.explore import build_page

    return build_page(nested)


@pytest.fixture(scope="module")
def nested_html(nested_page):
    from pxla_mlir.mlir.explore import render

    return render(nested_page)


# -- the model of the examples -----------------------------------------------------------------------

def test_nested_stages(nested, nested_page):
    page = nested_page
    assert [s.name for s in page.stages] == ["jaxpr", "pxla", *NESTED_PASSES, "mhlo", "xla"]
    assert "psum" in page.stage("jaxpr").text and "pxla_pmap" in page.stage("jaxpr").text
    assert page.stage("pxla").text == nested.pxla_text()
    passes = page.passes
    assert passes[-1].text == nested.as_text() == page.stage("mhlo").text  # the replay is the real pipeline
    previous = nested.pxla_text()
    for s in passes:
        assert s.changed == (s.text != previous), s.name
        assert isinstance(s.seconds, float) and s.seconds > 0  # each pass was replayed and timed
        kept_and_added = [line for op, line in s.diff if op != "-"]
        assert not s.changed or kept_and_added == s.text.splitlines(), s.name
        previous = s.text
    shard = page.stage("pxla-expand-shard")
    assert any("@pxla.shard" in line for op, line in shard.diff if op == "-")
    assert any("mhlo.dynamic_slice" in line for op, line in shard.diff if op == "+")
    unshard = page.stage("pxla-expand-unshard")
    assert sum("@pxla.unshard" in line for op, line in unshard.diff if op == "-") == 2
    assert sum("mhlo.all_gather" in line for op, line in unshard.diff if op == "+") == 2
    assert not page.stage("symbol-dce").changed and page.stage("symbol-dce").diff == ()
    assert page.stage("xla").text.startswith("HloModule") and page.stage("xla").seconds > 0


def test_nested_collectives_by_hand(nested_page):
    page = nested_page
    assert (page.num_replicas, page.num_partitions) == (8, 1)
    assert (page.mesh.names, page.mesh.sizes) == (("host", "device"), (2, 4))  # _pxla_rep named after the inner pmap
    rows, by_host = ((0, 1, 2, 3), (4, 5, 6, 7)), ((0, 4), (1, 5), (2, 6), (3, 7))
    got = [(c.op, c.dtype, c.operand_shape, c.result_shape, c.groups, c.operand_bytes, c.bytes_sent)
           for c in page.collectives]
    assert got == [
        ("all_reduce", "f32", (128,), (128,), rows, 512, (768,) * 8),  # psum over "device": 2*3/4*512
        ("all_reduce", "f32", (128,), (128,), by_host, 512, (512,) * 8),  # psum over "host": 2*1/2*512
        ("all_gather", "f32", (128, 1), (128, 4), rows, 512, (1536,) * 8),  # unshard: 3/4 * 2048
        ("all_gather", "f32", (1, 128), (4, 128), rows, 512, (1536,) * 8),
    ]
    assert [c.value for c in page.collectives] == ["%8", "%9", "%11", "%13"]


def test_nested_in_partition_mode_gives_the_same_devices():
    from pxla_mlir.mlir.explore import build_page

    page = build_page(lower(NESTED, mode="partition"), compile=False)
    assert (page.num_replicas, page.num_partitions) == (1, 8)
    assert {c.mode for c in page.collectives} == {"flattened-id"}
    assert [c.groups for c in page.collectives] == [((0, 1, 2, 3), (4, 5, 6, 7)), ((0, 4), (1, 5), (2, 6), (3, 7)),
                                                   ((0, 1, 2, 3), (4, 5, 6, 7)), ((0, 1, 2, 3), (4, 5, 6, 7))]
    assert page.stage("xla").text is None and page.stage("xla").note == "(not compiled)"


def test_nested_shardings(nested_page):
    views = {v.label: v for v in nested_page.shardings}
    arg = views["argument 0"]
    assert arg.shape == (2, 4, 128) and arg.dims == (("host",), (), ())
    assert arg.ranges[5] == ((1, 2), (0, 4), (0, 128))  # device 5 is host 1
    assert views["result 0"].shape == (2, 128, 4)


def test_nested_cost_analysis_is_xlas(nested, nested_page):
    cost = dict(nested_page.cost)
    want = nested.compile().cost_analysis()
    assert cost["flops"] == want["flops"] > 0 and cost["bytes accessed"] == want["bytes accessed"]


def test_train_step_pmean_of_gradients_by_hand():
    from pxla_mlir.mlir.explore import build_page

    page = build_page(lower(TRAIN), compile=False)
    assert page.mesh.names == ("batch",) and page.mesh.sizes == (8,)
    # one all-reduce over all 8 devices per parameter and the loss: 2 * 7/8 * bytes
    assert [(c.operand_shape, c.bytes_sent[0]) for c in page.collectives] == \
        [((16, 32), 3584), ((32,), 224), ((32, 4), 896), ((), 7)]
    assert all(c.groups == (tuple(range(8)),) for c in page.collectives)
    views = {v.label: v for v in page.shardings}
    assert views["argument 0"].dims == ((), ()) and views["argument 3"].dims == (("batch",), (), ())
    assert views["argument 3"].ranges[3] == ((3, 4), (0, 16), (0, 16))


@pytest.mark.parametrize("mode, group_mode", [("replica", "cross-replica"), ("partition", "cross-partition")])
def test_ppermute_and_all_to_all_by_hand(mode, group_mode):
    import numpy as np
    from jax import lax

    import pxla_mlir
    from pxla_mlir.mlir.explore import build_page, render

    def f(x, y):
        return (lax.ppermute(x, "i", perm=[(j, (j + 1) % 8) for j in range(8)]),
                lax.all_to_all(y, "i", 0, 0, tiled=True))

    lowered = pxla_mlir.pmap(f, "i", mode=mode).lower(np.zeros((8, 4), np.float32), np.zeros((8, 8, 2), np.float32))
    page = build_page(lowered, compile=False)
    permute, a2a = page.collectives
    assert (permute.op, permute.mode) == ("collective_permute", group_mode)
    assert permute.groups == tuple((j, (j + 1) % 8) for j in range(8))
    assert permute.bytes_sent == (16,) * 8  # every device is a source of f32[4]
    assert (a2a.op, a2a.groups, a2a.operand_bytes) == ("all_to_all", (tuple(range(8)),), 64)
    assert a2a.bytes_sent == (56,) * 8  # keeps 1/8 of f32[8,2], sends 7/8
    text = render(page)
    assert text.count('class="arrow"') == 8 and text.count('<svg class="coll"') == 2


def test_xmap_named_axes_shardings_and_collectives():
    from pxla_mlir.mlir.explore import build_page

    page = build_page(lower(XMAP), compile=False)
    assert [(n.name, n.size, n.resources, n.devices, n.tile) for n in page.named_axes] == \
        [("batch", 8, ("x",), 2, 4), ("feat", 16, ("y",), 4, 4)]
    (arg,) = [v for v in page.shardings if v.label == "argument 0"]
    assert arg.shape == (8, 16) and arg.dims == (("x",), ("y",))
    assert arg.ranges[6] == ((4, 8), (8, 12))  # device 6 = (x=1, y=2)
    # pmean over batch (x: pairs), psum over feat (y: rows of 4), each on f32[4] = 16 B
    assert [(c.groups, c.bytes_sent[0]) for c in page.collectives] == \
        [(((0, 4), (1, 5), (2, 6), (3, 7)), 16), (((0, 1, 2, 3), (4, 5, 6, 7)), 24)]
    assert "psum" in page.stage("jaxpr").text


def test_compare_aligns_stages_and_diffs_them(nested_page):
    from pxla_mlir.mlir.explore import build_page, compare_pages

    other = build_page(lower(NESTED, unshard="all-reduce"), compile=False)
    cmp = compare_pages(nested_page, other, "gather", "reduce")
    assert [r.name for r in cmp.rows] == ["jaxpr", "pxla", *NESTED_PASSES, "mhlo", "xla"]
    rows = {r.name: r for r in cmp.rows}
    assert rows["jaxpr"].diff == "" and rows["pxla"].diff == "" and rows["pxla-expand-shard"].diff == ""
    assert "dynamic_update_slice" in rows["pxla-expand-unshard"].diff
    assert "dynamic_update_slice" in rows["mhlo"].diff and "-" in rows["mhlo"].diff
    for shardings, expand in (("sdy", "pxla-expand-manual-computation"), ("gspmd", "pxla-expand-manual-sharding")):
        partition = build_page(lower(NESTED, mode="partition", shardings=shardings), compile=False)
        names = [r.name for r in compare_pages(nested_page, partition).rows]
        assert "pxla-convert-to-replica-mode / pxla-wrap-manual-main" in names and expand in names


# -- the HTML -------------------------------------------------------------------------------------------

def test_page_is_self_contained_small_and_complete(nested_page, nested_html):
    page, text = nested_page, nested_html
    assert len(text.encode()) < 1_000_000
    assert "://" not in text and "<link" not in text and " src=" not in text  # nothing fetched
    for s in page.stages:
        assert f'data-stage="{s.name}"' in text
    assert text.count('<svg class="coll"') == len(page.collectives) == 4
    assert text.count('data-m="+"') == sum(s.added for s in page.passes)
    assert text.count('data-m="-"') == sum(s.removed for s in page.passes)
    for s in page.passes:
        closed = f'data-stage="{s.name}">' in text  # no " open"
        assert closed == (not s.changed), s.name
    assert "768 B" in text and "1.5 KiB" in text


def test_lowered_explore_and_notebook(nested, tmp_path):
    path = tmp_path / "page.html"
    assert nested.explore(str(path)) == str(path)
    text = path.read_text()
    assert text.startswith("<!DOCTYPE html>") and 'data-stage="pxla-expand-unshard"' in text
    frame = nested._repr_html_()
    assert frame.startswith("<iframe srcdoc=") and "&lt;!DOCTYPE html&gt;" in frame and "<script" not in frame


# -- the command line -----------------------------------------------------------------------------------

def cli(*args, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    return subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=300, cwd=cwd)


@pytest.mark.subprocess
@pytest.mark.slow
def test_cli_writes_the_page(tmp_path):
    out = tmp_path / "nested.html"
    result = cli("explore", NESTED, "-o", out)
    assert result.returncode == 0, result.stderr
    assert not result.stdout and f"wrote {out} (" in result.stderr and out.stat().st_size < 1_000_000
    text = out.read_text()
    assert all(f'data-stage="{name}"' in text for name in NESTED_PASSES)
    default = cli("explore", NESTED, "--no-compile", cwd=tmp_path)
    assert default.returncode == 0 and (tmp_path / "two_level_sum.html").is_file()


@pytest.mark.subprocess
def test_cli_compare_with_the_other_unshard_strategy(tmp_path):
    out = tmp_path / "cmp.html"
    result = cli("explore", NESTED, "--compare", "?unshard=all-reduce", "-o", out, "--no-compile")
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    assert f"{NESTED}?unshard=all-reduce" in text
    assert "pxla-pmap-pipeline{mode=replica unshard=all-reduce sharding-dialect=sdy}" in text
    assert "dynamic_update_slice" in text and 'class="row differs"' in text and 'class="row same"' in text


@pytest.mark.parametrize("args, message", [
    (("explore", "no_colon_here"), "bad target 'no_colon_here'"),
    (("explore", "missing/file.py:f"), "no such file 'missing/file.py'"),
    (("explore", NESTED, "--compare", "nested.mlir"), "--compare needs an emit spec"),
    (("explore", NESTED, "--compare", "?colour=red"), "unknown option 'colour' in --compare '?colour=red'"),
    (("explore", NESTED, "--compare", "?"), "names no target and no option to change"),
    (("explore", NESTED, "--compare", "?unshard"), "bad --compare '?unshard'"),
    (("explore", NESTED, "--compare", "?unshard=sideways"),
     "unshard=sideways in --compare '?unshard=sideways': invalid choice: 'sideways' (choose from 'all-gather', "
     "'all-reduce')"),
    (("explore", NESTED, "--compare", "missing/file.py:f"), "no such file 'missing/file.py'"),
    (("explore", NESTED, "--no-compile", "-o", "/nonexistent-dir/page.html"), "cannot write '/nonexistent-dir/page.html'"),
])
@pytest.mark.subprocess
def test_cli_mistakes_give_one_line(args, message):
    result = cli(*args)
    assert result.returncode == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pxla-mlir: error: "), result.stderr
    assert message in lines[0], lines[0]


# -- a real browser -----------------------------------------------------------------------------------

def _chromium():
    from pxla_mlir.mlir.explore.browser import find_chromium

    path = find_chromium()
    if path is None:
        pytest.skip("headless Chromium not found: install Debian's 'chromium' package (.ci/run does, as root)")
    return path


def _stage_block(dom: str, name: str) -> str:
    start = dom.index(f'data-stage="{name}"')
    return dom[start:dom.index("</details>", start)]


@pytest.mark.browser
def test_page_in_headless_chromium(nested_page, nested_html, tmp_path):
    _chromium()
    from PIL import Image

    from pxla_mlir.mlir.explore.browser import dump_dom, ready_ms, screenshot

    path = tmp_path / "nested.html"
    path.write_text(nested_html, encoding="utf-8")
    dom, log = dump_dom(path)
    assert re.search(r'<div id="js-errors" hidden="">\s*</div>', dom), re.findall(r'id="js-errors".{0,400}', dom)
    assert "Uncaught" not in log and ":CONSOLE" not in log, log[-2000:]
    assert ready_ms(dom) is not None  # the script ran to the end
    for s in nested_page.stages:
        assert f'data-stage="{s.name}"' in dom
    assert dom.count('<svg class="coll"') == len(nested_page.collectives)
    assert dom.count('data-m="+"') == sum(s.added for s in nested_page.passes) > 0
    assert dom.count('data-m="-"') == sum(s.removed for s in nested_page.passes) > 0
    # SSA linking: %8 of the final MHLO is defined once and used twice (by %9 and %10)
    final = _stage_block(dom, "mhlo")
    (key,) = re.findall(r'<span class="v def" data-v="(\w+)">%8</span>', final)
    assert len(re.findall(f'data-v="{key}"', final)) == 3
    # each all_reduce region has its own %arg1
    assert len(set(re.findall(r'<span class="v def" data-v="(\w+)">%arg1</span>', final))) == 2
    assert '<span class="o">mhlo.all_gather</span>' in final or '<span class="o">"mhlo.all_gather"</span>' in final
    png = tmp_path / "shot.png"
    screenshot(path, png)
    image = Image.open(png).convert("RGB")
    assert image.size == (1400, 1000)
    colors = image.getcolors(maxcolors=1 << 20)
    assert len(colors) > 100  # text, tables and coloured device grids
    white = sum(n for n, rgb in colors if rgb == (255, 255, 255))
    assert white < 0.9 * image.size[0] * image.size[1]


@pytest.mark.browser
def test_compare_page_in_headless_chromium(tmp_path):
    _chromium()
    from pxla_mlir.mlir.explore import build_page, compare_pages, render_comparison
    from pxla_mlir.mlir.explore.browser import dump_dom

    a = build_page(lower(XMAP), compile=False)
    b = build_page(lower(XMAP, lowering="manual"), compile=False)
    path = tmp_path / "cmp.html"
    path.write_text(render_comparison(compare_pages(a, b, "replica", "manual")), encoding="utf-8")
    dom, log = dump_dom(path)
    assert re.search(r'<div id="js-errors" hidden="">\s*</div>', dom) and "Uncaught" not in log
    assert 'class="row differs"' in dom and "devview" in dom and "data-ready-ms" in dom


# The laid-out compare page, measured in the browser: the page's width, and
# every pair of boxes (tables, figures, code, the cost box...) of side A and
# side B of each two-column block that intersect, as each side's scrolling
# boxes clip them; plus every element drawn outside its own side's column.
LAYOUT_JS = """(function () {
  var BOXES = "table, figure, pre, svg, details, summary, p, h3, dl, .cost, .overview, .tscroll, .views, .side-head";
  var styles = new Map();
  function style(el) { if (!styles.has(el)) styles.set(el, getComputedStyle(el)); return styles.get(el); }
  function shown(el, side) {  // el's rectangle, cut by every ancestor that clips it; null if nothing is left
    var r = el.getBoundingClientRect(), box = {l: r.left, t: r.top, r: r.right, b: r.bottom};
    for (var p = el.parentElement; p && p !== side; p = p.parentElement) {
      var cs = style(p), q = p.getBoundingClientRect();
      if (cs.overflowX !== "visible") { box.l = Math.max(box.l, q.left); box.r = Math.min(box.r, q.right); }
      if (cs.overflowY !== "visible") { box.t = Math.max(box.t, q.top); box.b = Math.min(box.b, q.bottom); }
    }
    return box.r - box.l > 0.5 && box.b - box.t > 0.5 ? box : null;
  }
  function name(el, side) {
    var cls = typeof el.className === "string" && el.className ? "." + el.className.split(" ").join(".") : "";
    return (side.closest("section, details") || {}).id + " " + el.tagName.toLowerCase() + cls;
  }
  var overlaps = [], outside = [];
  document.querySelectorAll(".sbs").forEach(function (sbs) {
    var sides = sbs.querySelectorAll(":scope > .side"), boxes = [[], []];
    [0, 1].forEach(function (k) {
      var col = sides[k].getBoundingClientRect();
      sides[k].querySelectorAll("*").forEach(function (el) {
        if (el.tagName !== "PRE" && el.closest("pre")) return;  // a pre scrolls its own lines
        var box = shown(el, sides[k]);
        if (!box) return;
        if (box.l < col.left - 0.5 || box.r > col.right + 0.5)
          outside.push("AB"[k] + " " + name(el, sides[k]) + " at x " + Math.round(box.l) + ".." + Math.round(box.r) +
                       ", its column " + Math.round(col.left) + ".." + Math.round(col.right));
        if (el.matches(BOXES)) boxes[k].push([el, box]);
      });
    });
    boxes[0].forEach(function (a) {
      boxes[1].forEach(function (b) {
        var w = Math.min(a[1].r, b[1].r) - Math.max(a[1].l, b[1].l);
        var h = Math.min(a[1].b, b[1].b) - Math.max(a[1].t, b[1].t);
        if (w > 0.5 && h > 0.5)
          overlaps.push("A " + name(a[0], sides[0]) + " and B " + name(b[0], sides[1]) + ": " + Math.round(w) + "x" +
                        Math.round(h) + " px");
      });
    });
  });
  return {width: window.innerWidth, scrollWidth: document.documentElement.scrollWidth,
          blocks: document.querySelectorAll(".sbs").length, overlaps: overlaps, outside: outside};
})()"""


@pytest.fixture(scope="module")
def readme_compare_pages(nested_page, tmp_path_factory):
    """The README's two --compare pages, compiled so that both sides have XLA's cost box."""
    _chromium()  # before lowering and compiling four programs for nothing
    from pxla_mlir.mlir.explore import build_page, compare_pages, render_comparison

    folder = tmp_path_factory.mktemp("compare")
    pairs = {"nested": (nested_page, build_page(lower(NESTED, unshard="all-reduce"))),
             "xmap": (build_page(lower(XMAP)), build_page(lower(XMAP, lowering="vectorize")))}
    paths = {}
    for name, (a, b) in pairs.items():
        assert a.cost and b.cost
        paths[name] = folder / f"{name}_compare.html"
        paths[name].write_text(render_comparison(compare_pages(a, b)), encoding="utf-8")
    return paths


@pytest.mark.parametrize("width", [1280, 1366, 1440, 1920])
@pytest.mark.parametrize("example", ["nested", "xmap"])
@pytest.mark.browser
def test_compare_page_fits_the_window(readme_compare_pages, example, width, tmp_path):
    _chromium()
    from PIL import Image

    from pxla_mlir.mlir.explore.browser import evaluate, screenshot

    path = readme_compare_pages[example]
    got = evaluate(path, LAYOUT_JS, (width, 900))
    assert got["width"] == width
    assert got["blocks"] >= 15  # collectives, shardings and one per stage row
    assert got["scrollWidth"] <= width, f"the page scrolls sideways: {got['scrollWidth']} px in a {width} px window"
    assert got["overlaps"] == [], f"{len(got['overlaps'])} boxes of A and B intersect: {got['overlaps'][:10]}"
    assert got["outside"] == [], f"{len(got['outside'])} elements leave their side's column: {got['outside'][:10]}"
    png = tmp_path / f"{example}_compare_{width}.png"
    screenshot(path, png, (width, 900))
    assert Image.open(png).size == (width, 900)
