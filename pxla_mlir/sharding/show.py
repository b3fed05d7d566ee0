"""Draw who holds which piece of an array, in the terminal (with rich).

Two views, like ``jax.debug.visualize_array_sharding`` and more:

* the *array view* (1-d and 2-d arrays): the array cut into the pieces the
  devices hold, each labelled with the devices that hold it;
* the *device view* (any rank): the devices laid out as the mesh (or the tile
  assignment), each cell showing the index range that device holds.
"""

from __future__ import annotations

import io
from typing import Sequence, Union

import numpy as np
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .hlo_sharding import HloSharding, parse as parse_hlo
from .spec import ShardingSpec, spec_to_indices

__all__ = ["shard_ranges", "render_sharding", "show_sharding"]

Sharding = Union[ShardingSpec, HloSharding, str]
Range = tuple[tuple[int, int], ...]  # (start, stop) per dimension

_COLORS = ["red", "green", "blue", "magenta", "cyan", "yellow", "bright_red", "bright_green",
           "bright_blue", "bright_magenta", "bright_cyan", "orange3", "purple", "turquoise2", "gold3", "pink1"]


def _as_sharding(sharding: Sharding) -> ShardingSpec | HloSharding:
    if isinstance(sharding, str):
        text = sharding.strip()
        return ShardingSpec.parse(text) if text.startswith("ShardingSpec") else parse_hlo(text)
    return sharding


def shard_ranges(shape: Sequence[int], sharding: Sharding, num_devices: int | None = None) -> list[Range | None]:
    """(start, stop) per dimension of the piece each logical device holds."""
    sharding = _as_sharding(sharding)
    shape = tuple(int(s) for s in shape)
    if isinstance(sharding, ShardingSpec):
        pieces = spec_to_indices(shape, sharding)
        return [_range(p, shape, sharding) for p in pieces]
    n = num_devices or sharding.num_devices or 1
    return [None if p is None else tuple(s.indices(d)[:2] for s, d in zip(p, shape))
            for p in sharding.shard_indices(shape, n)]


def _range(index, shape, spec: ShardingSpec) -> Range:
    out, it = [], iter(index)
    for size, s in zip(shape, spec.sharding):
        i = next(it)
        out.append((i, i + 1) if isinstance(i, (int, np.integer)) else i.indices(size)[:2])
    return tuple(out)


def _layout(sharding: ShardingSpec | HloSharding, n: int) -> np.ndarray:
    """Device indices arranged in 2-d for the device view."""
    if isinstance(sharding, ShardingSpec):
        grid = np.arange(n).reshape(sharding.mesh_shape or (1,))
    elif sharding.kind == "tiled":
        grid = sharding.device_array()
    else:
        grid = np.arange(n)
    grid = grid.reshape(-1, grid.shape[-1]) if grid.ndim >= 2 else grid.reshape(1, -1)
    return grid


def _fmt(r: Range) -> str:
    return "[" + ", ".join(f"{a}:{b}" for a, b in r) + "]"


def render_sharding(shape: Sequence[int], sharding: Sharding, num_devices: int | None = None,
                    device_names: Sequence[str] | None = None):
    """A rich renderable with the array view (rank <= 2) and the device view."""
    sharding = _as_sharding(sharding)
    ranges = shard_ranges(shape, sharding, num_devices)
    n = len(ranges)
    names = list(device_names) if device_names is not None else [str(i) for i in range(n)]
    pieces: dict[Range, list[int]] = {}
    for dev, r in enumerate(ranges):
        if r is not None:
            pieces.setdefault(r, []).append(dev)
    color = {r: _COLORS[k % len(_COLORS)] for k, r in enumerate(pieces)}
    title = f"{tuple(shape)} {sharding if isinstance(sharding, HloSharding) else repr(sharding)}"
    parts = [Text(title, style="bold")]
    if 1 <= len(shape) <= 2:
        if len(pieces) <= MAX_CELLS:
            parts.append(_array_view(tuple(shape), pieces, color, names))
        else:
            parts.append(Text(f"array: {len(pieces)} pieces, more than {MAX_CELLS} to draw (see the devices)"))
    if n <= MAX_CELLS:
        parts.append(_device_view(_layout(sharding, n), ranges, color, names))
    else:
        parts.append(_device_summary(ranges, len(pieces), color, names))
    return Group(*parts)


#: Views with more cells than this are summarized: a table of a million cells takes rich minutes to draw.
MAX_CELLS = 256
#: Devices listed at each end of a summarized device view.
SUMMARY_ENDS = 8


def _device_summary(ranges, distinct: int, color, names) -> Table:
    table = Table(box=box.ROUNDED, show_header=False, title=f"devices: {len(ranges)} holding {distinct} distinct "
                  f"pieces (the first and last {SUMMARY_ENDS})")
    table.add_column(justify="right")
    table.add_column()
    shown = [*range(SUMMARY_ENDS), None, *range(len(ranges) - SUMMARY_ENDS, len(ranges))]
    for dev in shown:
        if dev is None:
            table.add_row("...", Text(f"{len(ranges) - 2 * SUMMARY_ENDS} more devices", style="dim"))
            continue
        r = ranges[dev]
        table.add_row(f"dev {names[dev]}", Text("nothing" if r is None else _fmt(r), style=color.get(r, "dim")))
    return table


def _array_view(shape, pieces, color, names) -> Table:
    to2 = (lambda r: r) if len(shape) == 2 else (lambda r: ((0, 1),) + r)
    rows = sorted({to2(r)[0] for r in pieces})
    cols = sorted({to2(r)[1] for r in pieces})
    table = Table(box=box.SQUARE, show_header=False, show_lines=True, title="array")
    for _ in cols:
        table.add_column(justify="center")
    at = {}
    for r, devs in pieces.items():
        at.setdefault(to2(r), (r, devs))
    for row in rows:
        cells = []
        for col in cols:
            hit = at.get((row, col))
            if hit:
                r, devs = hit
                label = "dev " + ",".join(names[d] for d in devs)
                cells.append(Text(f"{label}\n{_fmt(r)}", style=f"bold {color[r]}"))
            else:
                cells.append(Text("nobody", style="dim"))
        table.add_row(*cells)
    return table


def _device_view(grid: np.ndarray, ranges, color, names) -> Table:
    table = Table(box=box.ROUNDED, show_header=False, show_lines=True, title="devices")
    for _ in range(grid.shape[1]):
        table.add_column(justify="center")
    for row in grid:
        cells = []
        for dev in row:
            r = ranges[int(dev)]
            text = "nothing" if r is None else _fmt(r)
            cells.append(Text(f"dev {names[int(dev)]}\n{text}", style=color.get(r, "dim")))
        table.add_row(*cells)
    return table


def show_sharding(shape: Sequence[int], sharding: Sharding, *, num_devices: int | None = None,
                  device_names: Sequence[str] | None = None, console: Console | None = None,
                  color: bool | None = None) -> str:
    """Prints the picture (to ``console``, default stdout) and returns it as plain text."""
    renderable = render_sharding(shape, sharding, num_devices, device_names)
    recorder = Console(record=True, file=io.StringIO(), width=(console.width if console else 120))
    recorder.print(renderable)
    out = console or Console(no_color=color is False, force_terminal=color)
    out.print(renderable)
    return recorder.export_text()
