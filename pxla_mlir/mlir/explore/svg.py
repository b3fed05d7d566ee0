"""Inline SVG pictures for the explore page: the device grid of one
collective (groups as coloured sets, bytes sent per device), and the pieces
of a sharded value (the array view and the device view that
``pxla-mlir show-sharding`` draws in the terminal)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from pxla_mlir.mlir.explore.model import Collective, MeshView, Range, ShardingView

__all__ = ["PALETTE", "collective_svg", "sharding_svgs", "fmt_bytes", "fmt_range"]

PALETTE = ("#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69", "#fccde5", "#ffed6f",
           "#bc80bd", "#ccebc5", "#a6cee3", "#fb9a99", "#cab2d6", "#ffffb3", "#b2df8a", "#fdbf6f")
NONE = "#eeeeee"
_CHAR = 6.7  # width of one 11px monospace character
_CELL_H, _GAP = 46, 8
_ARC = 34  # room under the grid for permute arrows


def color(k: int) -> str:
    return PALETTE[k % len(PALETTE)]


def fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def fmt_range(r: Range | None) -> str:
    return "nothing" if r is None else "[" + ", ".join(f"{a}:{b}" for a, b in r) + "]"


def _t(x: float, y: float, text: str, cls: str = "", anchor: str = "middle") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.0f}" y="{y:.0f}" text-anchor="{anchor}"{c}>{escape(text)}</text>'


def _grid(mesh: MeshView, labels: Mapping[int, Sequence[str]], fills: dict[int, str], title: str,
          extra=None, cls: str = "", below: int = 0) -> str:
    """A device grid (last mesh axis across); ``extra(centres)`` draws on top."""
    grid = mesh.grid()
    longest = max((len(s) for lines in labels.values() for s in lines), default=6)
    w = max(76, int(longest * _CHAR) + 14)
    multi = len(grid) > 1
    left = 70 if multi else 8
    top = 36
    width = left + len(grid[0]) * (w + _GAP)
    height = top + len(grid) * (_CELL_H + _GAP) + below
    parts = [f'<svg class="{cls}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             f'role="img"><title>{escape(title)}</title>']
    col_axis = mesh.names[-1]
    parts.append(_t(left, 12, f"{col_axis} \u2192 ({mesh.sizes[-1]})", "axis", "start"))
    centres = {}
    for c in range(len(grid[0])):
        parts.append(_t(left + c * (w + _GAP) + w / 2, 30, f"{col_axis}={c}", "idx"))
    for r, row in enumerate(grid):
        y = top + r * (_CELL_H + _GAP)
        if multi:
            coords = mesh.coords(row[0])[:-1]
            label = ",".join(f"{n}={i}" for n, i in zip(mesh.names[:-1], coords))
            parts.append(_t(left - 6, y + _CELL_H / 2 + 4, label, "idx", "end"))
        for c, dev in enumerate(row):
            x = left + c * (w + _GAP)
            centres[dev] = (x + w / 2, y + _CELL_H / 2)
            lines = labels.get(dev, (f"dev {dev}",))
            parts.append(f'<g class="dev" data-dev="{dev}"><rect x="{x}" y="{y}" width="{w}" height="{_CELL_H}" '
                         f'rx="5" fill="{fills.get(dev, NONE)}"/>')
            for k, line in enumerate(lines):
                parts.append(_t(x + w / 2, y + 18 + 15 * k, line, "b" if k == 0 else ""))
            parts.append("</g>")
    if multi:
        rows_axis = ",".join(mesh.names[:-1])
        parts.append(_t(8, 12, f"{rows_axis} \u2193", "axis", "start"))
    if extra is not None:
        parts.append(extra(centres))
    parts.append("</svg>")
    return "".join(parts)


def collective_svg(c: Collective, mesh: MeshView, prefix: str = "") -> str:
    """The devices of the mesh, each group of ``c`` in its own colour, each
    device labelled with the bytes it sends per call; collective_permute
    draws an arrow from each source to its target."""
    fills: dict[int, str] = {}
    for k, group in enumerate(c.groups):
        for d in group if c.op != "collective_permute" else group[:1]:
            fills.setdefault(d, color(k))
    labels = {d: (f"dev {d}", f"sends {fmt_bytes(c.bytes_sent[d])}") for d in range(mesh.num_devices)}
    title = f"{c.value} = {c.op}: {len(c.groups)} groups"
    if c.op != "collective_permute":
        return _grid(mesh, labels, fills, title, cls="coll")
    marker = f"{prefix}arrow{c.index}"

    def arrows(centres) -> str:
        out = [f'<defs><marker id="{marker}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
               f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z"/></marker></defs>']
        for src, dst in c.groups:
            if src == dst or src not in centres or dst not in centres:
                continue
            # an arc under the cells, deeper for longer hops, so arrows stay off the labels
            (x1, y1), (x2, y2) = centres[src], centres[dst]
            y1, y2 = y1 + _CELL_H / 2, y2 + _CELL_H / 2
            dip = max(y1, y2) + 10 + min(30, abs(x2 - x1) / 12 + abs(y2 - y1) / 6)
            out.append(f'<path class="arrow" d="M{x1 - 6:.0f},{y1:.0f} Q{(x1 + x2) / 2:.0f},{dip:.0f} '
                       f'{x2 + 6:.0f},{y2:.0f}" marker-end="url(#{marker})"/>')
        return "".join(out)

    return _grid(mesh, labels, fills, title, extra=arrows, cls="coll", below=_ARC)


def _pieces(v: ShardingView) -> dict[Range, list[int]]:
    pieces: dict[Range, list[int]] = {}
    for dev, r in enumerate(v.ranges):
        if r is not None:
            pieces.setdefault(r, []).append(dev)
    return pieces


def sharding_svgs(v: ShardingView, mesh: MeshView) -> str:
    """The array view (rank 1 and 2) and the device view of one value."""
    pieces = _pieces(v)
    colors = {r: color(k) for k, r in enumerate(pieces)}
    out = []
    if 1 <= len(v.shape) <= 2:
        out.append(_array_view(v, pieces, colors))
    fills = {d: colors[r] for d, r in enumerate(v.ranges) if r is not None}
    labels = {d: (f"dev {d}", fmt_range(r)) for d, r in enumerate(v.ranges)}
    out.append(_grid(mesh, labels, fills, f"{v.label}: which piece each device holds", cls="devview"))
    return "".join(out)


def _array_view(v: ShardingView, pieces: dict[Range, list[int]], colors: dict[Range, str]) -> str:
    shape = v.shape if len(v.shape) == 2 else (1,) + v.shape
    as2 = (lambda r: r) if len(v.shape) == 2 else (lambda r: ((0, 1),) + r)
    width = 420
    rows = len({as2(r)[0] for r in pieces})
    height = min(220, max(48, 46 * rows))
    parts = [f'<svg class="arrview" width="{width + 2}" height="{height + 2}" viewBox="0 0 {width + 2} {height + 2}" '
             f'role="img"><title>{escape(v.label)}: the array cut into the pieces devices hold</title>']
    for r, devs in pieces.items():
        (r0, r1), (c0, c1) = as2(r)
        x, w = 1 + c0 / shape[1] * width, (c1 - c0) / shape[1] * width
        y, h = 1 + r0 / shape[0] * height, (r1 - r0) / shape[0] * height
        who = "dev " + ",".join(map(str, devs))
        parts.append(f'<g class="piece"><title>{escape(who)} {escape(fmt_range(r))}</title>'
                     f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{colors[r]}" '
                     f'stroke="#333" stroke-width="1"/>')
        one_line = f"{who} {fmt_range(r)}"
        if w >= max(len(who), len(fmt_range(r))) * _CHAR and h >= 30:
            parts.append(_t(x + w / 2, y + h / 2 - 2, who, "b"))
            parts.append(_t(x + w / 2, y + h / 2 + 12, fmt_range(r)))
        elif w >= len(one_line) * _CHAR and h >= 14:
            parts.append(_t(x + w / 2, y + h / 2 + 4, one_line))
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)
