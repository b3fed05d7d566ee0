"""The explore page model as one self-contained HTML string.

The CSS and JS beside this file are inlined (no network: the page works
from file://). Diff markers, collapsing and the SVG pictures are plain HTML;
the JS only adds syntax highlighting and SSA linking, so the page reads
without it too.
"""

from __future__ import annotations

import functools
import importlib.resources
from collections.abc import Sequence
from html import escape

from pxla_mlir.mlir.explore.model import Collective, Comparison, Page, Stage
from pxla_mlir.mlir.explore.svg import collective_svg, color, fmt_bytes, sharding_svgs

__all__ = ["render", "render_comparison"]


@functools.cache
def _asset(name: str) -> str:
    package = __name__.rpartition(".")[0]  # the assets sit beside this module
    return importlib.resources.files(package).joinpath(name).read_text(encoding="utf-8")


def _e(text: str) -> str:
    return escape(text, quote=False)


def _a(text: str) -> str:
    return escape(text, quote=True)


def _doc(title: str, body: str, body_class: str = "") -> str:
    # head.js first: it records errors from everything after it.
    attrs = f' class="{body_class}"' if body_class else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{_e(title)}</title><script>{_asset("head.js")}</script><style>{_asset("page.css")}</style>'
            f'</head><body{attrs}><div id="js-errors" hidden></div>{body}'
            f'<div id="status" hidden></div><script>{_asset("page.js")}</script></body></html>\n')


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1e3:.2f} ms"


# -- code blocks ----------------------------------------------------------------------------------

def _code(text: str, lang: str) -> str:
    return f'<pre class="ir" data-lang="{lang}">{_e(text)}</pre>'


_MARK = {"+": ' class="l a" data-m="+"', "-": ' class="l r" data-m="-"', " ": ' class="l"'}


def _diff_code(ops: Sequence[tuple[str, str]], lang: str) -> str:
    lines = "\n".join(f"<span{_MARK[op]}>{_e(line)}</span>" for op, line in ops)
    return f'<pre class="ir diff" data-lang="{lang}">{lines}</pre>'


def _udiff_code(text: str) -> str:
    """A unified diff (headers dropped) as marked lines."""
    out = []
    for line in text.splitlines():
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            out.append(f'<span class="l h">{_e(line)}</span>')
        elif line[:1] in "+-":
            out.append(f"<span{_MARK[line[0]]}>{_e(line[1:])}</span>")
        else:
            out.append(f'<span class="l">{_e(line[1:])}</span>')
    return f'<pre class="ir diff udiff" data-lang="mlir">{chr(10).join(out)}</pre>'


def _stage_body(s: Stage) -> str:
    if s.text is None:
        return f'<p class="note">{_e(s.note or "(not available)")}</p>'
    if s.kind == "pass" and not s.changed:
        return '<p class="note">no change: the module is the same as after the previous stage</p>'
    if s.kind == "pass" and s.diff and (s.added or s.removed):
        return _diff_code(s.diff, s.lang)
    note = '<p class="note">only SSA names or the order of functions changed</p>' if s.kind == "pass" else ""
    return note + _code(s.text, s.lang)


def _delta(s: Stage) -> str:
    if s.kind != "pass":
        return ""
    if not s.changed:
        return '<span class="delta same">no change</span>'
    return f'<span class="delta"><span class="plus">+{s.added}</span> <span class="minus">\u2212{s.removed}</span></span>'


_KIND = {"jaxpr": "traced jaxpr", "import": "pxla form from import", "final": "final MHLO",
         "xla": "XLA's optimized HLO"}


def _summary(s: Stage, number: str) -> str:
    kind = number if s.kind == "pass" else _KIND[s.kind]
    return (f'<summary><span class="sname">{_e(s.name)}</span> <span class="kind">{_e(kind)}</span> '
            f'{_delta(s)} <span class="time">{_ms(s.seconds)}</span></summary>')


def _stage_classes(s: Stage) -> str:
    extra = " same" if s.kind == "pass" and not s.changed else (" changed" if s.kind == "pass" else "")
    return f"stage {s.kind}{extra}"


def _stages(page: Page, prefix: str = "") -> str:
    parts = ['<section id="stages"><h2>Stages</h2>']
    passes = page.passes
    for k, s in enumerate(page.stages):
        number = f"pass {passes.index(s) + 1}/{len(passes)}" if s.kind == "pass" else ""
        is_open = "" if s.kind == "pass" and not s.changed else " open"
        parts.append(f'<details class="{_stage_classes(s)}" id="{prefix}s-{k}" data-stage="{_a(s.name)}"{is_open}>'
                     f'{_summary(s, number)}{_stage_body(s)}</details>')
    parts.append("</section>")
    return "".join(parts)


# -- overview ---------------------------------------------------------------------------------------

def _mesh_text(page: Page) -> str:
    return " \u00d7 ".join(f"{n}={s}" for n, s in zip(page.mesh.names, page.mesh.sizes))


def _header(page: Page) -> str:
    passes = page.passes
    total = sum(s.seconds or 0.0 for s in passes)
    xla = page.stage("xla").seconds
    changed = sum(1 for s in passes if s.changed)
    return (f'<header><h1>{_e(page.title)}</h1><dl>'
            f'<dt>pipeline</dt><dd><code>{_e(page.pipeline)}</code></dd>'
            f'<dt>devices</dt><dd>{page.num_devices} ({page.num_replicas} replicas \u00d7 {page.num_partitions} '
            f'partitions), mesh {_e(_mesh_text(page))}</dd>'
            f'<dt>passes</dt><dd>{len(passes)} ({changed} changed the module), {_ms(total)} in all'
            + (f"; XLA compile {_ms(xla)}" if xla is not None else "") +
            f'</dd><dt>collectives</dt><dd>{len(page.collectives)}</dd></dl>'
            f'<p class="hint">Click an SSA value (<code>%name</code>) to see its definition and uses. '
            f'Passes that changed nothing are collapsed.</p></header>')


def _toc(page: Page, prefix: str = "") -> str:
    longest = max((s.seconds or 0.0 for s in page.passes), default=0.0) or 1.0
    items = ['<nav id="toc"><h2>Contents</h2><ol>']
    if page.collectives:
        items.append(f'<li><a href="#{prefix}collectives">devices and collectives</a></li>')
    if page.shardings or page.named_axes:
        items.append(f'<li><a href="#{prefix}shardings">mesh and shardings</a></li>')
    for k, s in enumerate(page.stages):
        cls = _stage_classes(s).replace("stage ", "")
        bar = ""
        if s.kind == "pass":
            bar = f'<span class="bar" style="width:{max(2, round(40 * (s.seconds or 0) / longest))}px"></span>'
        items.append(f'<li class="{cls}"><a href="#{prefix}s-{k}">{_e(s.name)}</a>{bar}'
                     f'<span class="t">{_ms(s.seconds)}</span></li>')
    items.append("</ol></nav>")
    return "".join(items)


def _groups_text(c: Collective, limit: int = 6) -> str:
    joined = ["{" + ",".join(map(str, g)) + "}" if c.op != "collective_permute" else f"{g[0]}\u2192{g[1]}"
              for g in c.groups]
    return " ".join(joined[:limit]) + (f" \u2026 ({len(joined)})" if len(joined) > limit else "")


def _sent_text(c: Collective) -> str:
    nonzero = [b for b in c.bytes_sent]
    lo, hi = min(nonzero), max(nonzero)
    return fmt_bytes(lo) if lo == hi else f"{fmt_bytes(lo)} \u2013 {fmt_bytes(hi)}"


def _shape(dtype: str, shape: Sequence[int]) -> str:
    return f"{dtype}[{','.join(map(str, shape))}]"


def _collective_table(page: Page, prefix: str) -> str:
    rows = ['<div class="tscroll"><table class="colls"><thead><tr><th>#</th><th>value</th><th>op</th>'
            '<th>operand \u2192 result</th><th>group mode</th><th>groups</th><th>bytes sent / device</th>'
            '<th>all devices</th></tr></thead><tbody>']
    for c in page.collectives:
        rows.append(f'<tr><td><a href="#{prefix}c-{c.index}">{c.index}</a></td><td><code>{_e(c.value)}</code></td>'
                    f'<td>{_e(c.op)}</td><td><code>{_e(_shape(c.dtype, c.operand_shape))} \u2192 '
                    f'{_e(_shape(c.dtype, c.result_shape))}</code></td><td>{_e(c.mode)}</td>'
                    f'<td title="{_a(_groups_text(c, 10 ** 6))}"><code>{_e(_groups_text(c))}</code></td>'
                    f'<td class="num" title="{c.bytes_sent}">{_sent_text(c)}</td>'
                    f'<td class="num">{fmt_bytes(sum(c.bytes_sent))}</td></tr>')
    rows.append("</tbody></table></div>")
    return "".join(rows)


_MAIN_COST = ("flops", "transcendentals", "bytes accessed", "optimal_seconds")


def _cost_table(page: Page) -> str:
    if not page.cost:
        return '<div class="cost"><h3>XLA cost analysis</h3><p class="note">(not compiled)</p></div>'
    cost = dict(page.cost)
    main = [(k, cost[k]) for k in _MAIN_COST if k in cost]
    rest = [(k, v) for k, v in page.cost if k not in _MAIN_COST]
    fmt = lambda v: f"{v:,.0f}" if float(v).is_integer() else f"{v:.4g}"  # noqa: E731
    rows = "".join(f'<tr><th>{_e(k)}</th><td class="num">{fmt(v)}</td></tr>' for k, v in main)
    more = "".join(f'<tr><th>{_e(k)}</th><td class="num">{fmt(v)}</td></tr>' for k, v in rest)
    return (f'<div class="cost"><h3>XLA cost analysis</h3><p class="note">per device program</p>'
            f'<table>{rows}</table>' + (f'<details><summary>all {len(page.cost)} entries</summary>'
                                        f'<table>{more}</table></details>' if rest else "") + '</div>')


def _collective_figure(c: Collective, page: Page, prefix: str) -> str:
    legend = "".join(f'<span class="chip" style="background:{color(k)}">'
                     f'{_e(_groups_text_one(c, g))}</span>' for k, g in enumerate(c.groups[:16]))
    sizes = "/".join(map(str, c.group_sizes))
    return (f'<figure class="coll-fig" id="{prefix}c-{c.index}"><figcaption><b>#{c.index} <code>{_e(c.value)}'
            f'</code> = {_e(c.op)}</b> {_e(_shape(c.dtype, c.operand_shape))} \u2192 '
            f'{_e(_shape(c.dtype, c.result_shape))}, {len(c.groups)} '
            f'{_plural(len(c.groups), "pair" if c.op == "collective_permute" else "group")}'
            f'{"" if c.op == "collective_permute" else f" of {sizes}"} ({_e(c.mode)}), '
            f'{_e(_sent_text(c))} sent per device per call<div class="legend">{legend}</div></figcaption>'
            f'{collective_svg(c, page.mesh, prefix)}</figure>')


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


def _groups_text_one(c: Collective, g: tuple[int, ...]) -> str:
    return f"{g[0]}\u2192{g[1]}" if c.op == "collective_permute" else "{" + ",".join(map(str, g)) + "}"


def _collectives(page: Page, prefix: str = "") -> str:
    head = (f'<section id="{prefix}collectives"><h2>Devices and collectives</h2>'
            f'<p>{page.num_devices} devices, mesh {_e(_mesh_text(page))}; device <i>d</i> is XLA\'s flattened id '
            f'replica \u00d7 {page.num_partitions} + partition. Bytes follow NCCL\'s bus-bandwidth conventions '
            f'(ring all-reduce sends 2(g\u22121)/g of its operand, all-gather, reduce-scatter and all-to-all '
            f'(g\u22121)/g of the full buffer, a permute source its operand).</p>')
    if not page.collectives:
        return head + '<p class="note">no collectives in the final module</p>' + _cost_table(page) + "</section>"
    figures = "".join(_collective_figure(c, page, prefix) for c in page.collectives)
    return (head + f'<div class="overview">{_collective_table(page, prefix)}{_cost_table(page)}</div>'
            + figures + "</section>")


def _shardings(page: Page, prefix: str = "") -> str:
    if not page.shardings and not page.named_axes:
        return ""
    parts = [f'<section id="{prefix}shardings"><h2>Mesh and shardings</h2>'
             f'<p>mesh {_e(_mesh_text(page))}</p>']
    if page.named_axes:
        parts.append('<div class="tscroll"><table class="axes"><thead><tr><th>named axis</th><th>size</th>'
                     '<th>resources (mesh axes)</th><th>devices</th><th>tile per device</th></tr></thead><tbody>')
        for n in page.named_axes:
            res = ", ".join(n.resources) or "(vectorized on each device)"
            parts.append(f'<tr><td><code>{_e(n.name)}</code></td><td class="num">{n.size}</td><td>{_e(res)}</td>'
                         f'<td class="num">{n.devices}</td><td class="num">{n.tile}</td></tr>')
        parts.append("</tbody></table></div>")
    for v in page.shardings:
        dims = " ".join("[" + ",".join(d) + "]" for d in v.dims)
        parts.append(f'<figure class="shard-fig"><figcaption><b>{_e(v.label)}</b> '
                     f'<code>{_e(_shape(v.dtype, v.shape))}</code>, mesh axes per dimension '
                     f'<code>{_e(dims)}</code></figcaption><div class="views">{sharding_svgs(v, page.mesh)}</div>'
                     f'</figure>')
    parts.append("</section>")
    return "".join(parts)


def render(page: Page) -> str:
    """The whole page (see the module docs)."""
    body = (f'{_toc(page)}<main>{_header(page)}{_collectives(page)}{_shardings(page)}{_stages(page)}'
            f'<footer>written by pxla-mlir explore; page ready in <span id="load-ms">(JavaScript off)</span></footer></main>')
    return _doc(f"{page.title} \u2014 pxla-mlir explore", body)


# -- comparison -----------------------------------------------------------------------------------

def _side(page: Page, index: int | None) -> str:
    if index is None:
        return '<p class="note">(no such stage on this side)</p>'
    s = page.stages[index]
    return (f'<div class="side-head">{_e(s.name)} {_delta(s)} <span class="time">{_ms(s.seconds)}</span></div>'
            + _stage_body(s))


def render_comparison(cmp: Comparison) -> str:
    """Two lowerings side by side, aligned by stage, with the normalised diff of each pair."""
    a, b = cmp.a, cmp.b
    head = (f'<header><h1>{_e(a.title)} <span class="vs">vs</span> {_e(b.title)}</h1><dl>'
            f'<dt>A</dt><dd><code>{_e(cmp.a_label)}</code><br><code>{_e(a.pipeline)}</code></dd>'
            f'<dt>B</dt><dd><code>{_e(cmp.b_label)}</code><br><code>{_e(b.pipeline)}</code></dd>'
            f'<dt>stages</dt><dd>{len(cmp.rows)} rows, {sum(1 for r in cmp.rows if r.diff)} differ</dd></dl>'
            f'<p class="hint">Each row: A\'s stage, B\'s stage, then the normalised MLIR diff A \u2192 B.</p></header>')
    toc = ['<nav id="toc"><h2>Contents</h2><ol><li><a href="#cmp-collectives">collectives</a></li>']
    rows = ['<section id="stages"><h2>Stages, aligned</h2>']
    for k, r in enumerate(cmp.rows):
        state = "differs" if r.diff else "same"
        mark = "\u2260" if r.diff else "="
        toc.append(f'<li class="{state}"><a href="#row-{k}">{_e(r.name)}</a><span class="t">{mark}</span></li>')
        diff = _udiff_code(r.diff) if r.diff else '<p class="note">A and B are the same here (normalised)</p>'
        rows.append(f'<details class="row {state}" id="row-{k}" data-stage="{_a(r.name)}"{" open" if r.diff else ""}>'
                    f'<summary><span class="sname">{_e(r.name)}</span> <span class="kind">'
                    f'{"differs" if r.diff else "same on both sides"}</span></summary>'
                    f'<div class="sbs"><div class="side">{_side(a, r.a)}</div><div class="side">{_side(b, r.b)}</div>'
                    f'</div><div class="abdiff"><div class="side-head">A \u2192 B</div>{diff}</div></details>')
    rows.append("</section>")
    toc.append("</ol></nav>")
    colls = (f'<section id="cmp-collectives"><h2>Collectives</h2><div class="sbs">'
             f'<div class="side"><h3>A</h3>{_collectives_inner(a, "a-")}</div>'
             f'<div class="side"><h3>B</h3>{_collectives_inner(b, "b-")}</div></div></section>')
    if a.shardings or b.shardings or a.named_axes or b.named_axes:
        colls += (f'<section id="cmp-shardings"><h2>Mesh and shardings</h2><div class="sbs">'
                  f'<div class="side"><h3>A</h3>{_shardings(a, "a-").replace("<h2>Mesh and shardings</h2>", "", 1)}'
                  f'</div><div class="side"><h3>B</h3>'
                  f'{_shardings(b, "b-").replace("<h2>Mesh and shardings</h2>", "", 1)}</div></div></section>')
        toc.insert(1, '<li><a href="#cmp-shardings">mesh and shardings</a></li>')
    body = f'{"".join(toc)}<main class="compare">{head}{colls}{"".join(rows)}<footer>written by pxla-mlir explore</footer></main>'
    return _doc(f"{a.title} vs {b.title} \u2014 pxla-mlir explore", body, "compare")


def _collectives_inner(page: Page, prefix: str) -> str:
    html = _collectives(page, prefix)
    return html.replace("<h2>Devices and collectives</h2>", "", 1)
