"""Draw who holds which piece of an array, in the terminal (with rich).

Two views, like ``jax.debug.visualize_array_sharding`` and more:

* the *array view* (1-d and 2-d arrays): the array cut into the pieces the
  devices hold, each labelled with the devices that hold it;
* the *device view* (any rank): the devices laid out as the mesh (or the tile
  assignment), each cell showing the index range that device holds.

Shardings are ours (ShardingSpec, HloSharding, their text) or jax's own
(``NamedSharding``, ``SingleDeviceSharding``, ...; devices labelled with
their ids), read through their methods so that this module imports no jax.
"""

from __future__ import annotations

import heapq
import io
from collections.abc import Sequence
from typing import Any

import numpy as np
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from pxla_mlir.mlir.sharding.hlo_sharding import HloSharding, parse as parse_hlo
from pxla_mlir.mlir.sharding.spec import ShardingSpec, spec_to_indices

__all__ = ["shard_ranges", "render_sharding", "show_sharding"]

#: Ours, an HLO sharding string, or any of jax's (``jax.sharding.NamedSharding``, ...).
Sharding = ShardingSpec | HloSharding | str | Any
Range = tuple[tuple[int, int], ...]  # (start, stop) per dimension

_COLORS = ["red", "green", "blue", "magenta", "cyan", "yellow", "bright_red", "bright_green",
           "bright_blue", "bright_magenta", "bright_cyan", "orange3", "purple", "turquoise2", "gold3", "pink1"]


def _as_sharding(sharding, ndim: int) -> ShardingSpec | HloSharding:
    if isinstance(sharding, str):
        text = sharding.strip()
        return ShardingSpec.parse(text) if text.startswith("ShardingSpec") else parse_hlo(text)
    if isinstance(sharding, (ShardingSpec, HloSharding)):
        return sharding
    found = _from_jax(sharding, ndim)
    if found is None:
        raise TypeError(f"cannot draw {sharding!r}: pass a jax sharding (NamedSharding, ...), a ShardingSpec, an "
                        f"HloSharding or an HLO sharding string")
    return found[0]


def _from_jax(sharding, ndim: int) -> tuple[HloSharding, list[str]] | None:
    """A jax ``Sharding`` (recognized by its methods, so this module needs no
    jax) as XLA's sharding of a rank-``ndim`` value and its devices' ids, in
    the order the sharding's device numbers refer to; None for other objects."""
    to_hlo, devices = getattr(sharding, "_to_xla_hlo_sharding", None), getattr(sharding, "_device_assignment", None)
    if not callable(to_hlo) or devices is None:
        return None
    check_rank = getattr(sharding, "check_compatible_aval", None)
    try:
        if callable(check_rank):  # XLA's sharding of a too-short rank drops the spec's extra entries silently
            check_rank((1,) * ndim)
        text = str(to_hlo(ndim))
    except Exception as e:  # e.g. a sharding of another rank
        raise ValueError(f"cannot draw {sharding!r} for a rank-{ndim} value: {e}") from None
    return parse_hlo(text), [str(getattr(d, "id", d)) for d in devices]


def _device_names(sharding, ndim: int, given) -> list[str] | None:
    if given is not None:
        return list(given)
    found = None if isinstance(sharding, (str, ShardingSpec, HloSharding)) else _from_jax(sharding, ndim)
    return found[1] if found else None


def shard_ranges(shape: Sequence[int], sharding: Sharding, num_devices: int | None = None) -> list[Range | None]:
    """(start, stop) per dimension of the piece each logical device holds (a
    jax sharding: each of its devices, in its device order)."""
    names = _device_names(sharding, len(shape), None)
    num_devices = num_devices or (len(names) if names else None)
    sharding = _as_sharding(sharding, len(shape))
    shape = tuple(int(s) for s in shape)
    if isinstance(sharding, ShardingSpec):
        pieces = spec_to_indices(shape, sharding)
        return [_range(p, shape, sharding) for p in pieces]
    n = num_devices or sharding.num_devices or 1
    return [None if p is None else tuple(s.indices(d)[:2] for s, d in zip(p, shape))
            for p in sharding.shard_indices(shape, n)]


def _range(index, shape, spec: ShardingSpec) -> Range:
    out, it = [], iter(index)
    for size, _ in zip(shape, spec.sharding):
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


#: Rows or columns of pieces (or devices) drawn per table; more are summarized
#: as the first ones, an ellipsis and the last one.
MAX_DRAWN = 8
#: Device names listed in a label before the rest are counted instead.
MAX_LISTED = 4


def _fmt(r: Range) -> str:
    return "[" + ", ".join(f"{a}:{b}" for a, b in r) + "]"


def _drawn(n: int) -> tuple[list[int], bool]:
    """The indices of ``n`` rows (or columns) that are drawn, and whether some are left out."""
    if n <= MAX_DRAWN:
        return list(range(n)), False
    return [*range(MAX_DRAWN - 2), n - 1], True


def _drawn_values(values: set) -> tuple[list, bool]:
    """The sorted values drawn of a set (the smallest ones and the largest), and whether some are left out."""
    if len(values) <= MAX_DRAWN:
        return sorted(values), False
    return [*heapq.nsmallest(MAX_DRAWN - 2, values), max(values)], True


def _label(devs: list[int], names: Sequence[str]) -> str:
    """"dev 0,1", "dev 0-3", or for many devices some and a count: "dev 0,4,...(16)"."""
    if len(devs) <= 2:
        return "dev " + ",".join(names[d] for d in devs)
    items: list[str] = []
    if all(names[d] == str(d) for d in devs):
        start = devs[0]
        for prev, d in zip(devs, devs[1:] + [-1]):  # device ids are >= 0: -1 ends the last run
            if d != prev + 1:  # a run of 3 or more is written a-b
                items += [f"{start}-{prev}"] if prev - start >= 2 else [str(i) for i in range(start, prev + 1)]
                start = d
    else:
        items = [names[d] for d in devs]
    if len(items) <= 2:
        return "dev " + ",".join(items)
    return f"dev {','.join(items[:2])},...({len(devs)})"


def render_sharding(shape: Sequence[int], sharding: Sharding, num_devices: int | None = None,
                    device_names: Sequence[str] | None = None):
    """A rich renderable with the array view (rank <= 2) and the device view.

    Tables of more than :data:`MAX_DRAWN` rows or columns are summarized (the
    first ones, an ellipsis, the last one), and a line says what was left out."""
    device_names = _device_names(sharding, len(shape), device_names)
    num_devices = num_devices or (len(device_names) if device_names is not None else None)
    sharding = _as_sharding(sharding, len(shape))
    ranges = shard_ranges(shape, sharding, num_devices)
    n = len(ranges)
    names = list(device_names) if device_names is not None else [str(i) for i in range(n)]
    pieces: dict[Range, list[int]] = {}
    for dev, r in enumerate(ranges):
        if r is not None:
            pieces.setdefault(r, []).append(dev)
    title = f"{tuple(shape)} {sharding if isinstance(sharding, HloSharding) else repr(sharding)}"
    parts: list[Text | Table] = [Text(title, style="bold")]
    left_out: list[str] = []
    colors: dict[Range, str] = {}
    if 1 <= len(shape) <= 2:
        parts.append(_array_view(tuple(shape), pieces, colors, names, left_out))
    parts.append(_device_view(_layout(sharding, n), ranges, colors, names, left_out))
    if left_out:
        parts.append(Text(f"summarized: {'; '.join(left_out)} ('...' marks the rest; shard_ranges() has them all)",
                          style="dim"))
    return Group(*parts)


def _color(colors: dict, r: Range) -> str:
    """A color per piece, in the order pieces are drawn."""
    return colors.setdefault(r, _COLORS[len(colors) % len(_COLORS)])


def _array_view(shape, pieces, colors, names, left_out) -> Table:
    to2 = (lambda r: r) if len(shape) == 2 else (lambda r: ((0, 1),) + r)
    at = {to2(r): (r, devs) for r, devs in pieces.items()}
    all_rows = {key[0] for key in at}
    all_cols = {key[1] for key in at}
    rows, cut_rows = _drawn_values(all_rows)
    cols, cut_cols = _drawn_values(all_cols)
    if cut_rows or cut_cols:
        left_out.append(f"the array view draws {len(rows)} of {len(all_rows)} rows and {len(cols)} of "
                        f"{len(all_cols)} columns of pieces")
    table = Table(box=box.SQUARE, show_header=False, show_lines=True, title="array")
    for _ in range(len(cols) + cut_cols):
        table.add_column(justify="center")
    for i, row in enumerate(rows):
        if cut_rows and i == len(rows) - 1:
            table.add_row(*[Text("...", style="dim")] * (len(cols) + cut_cols))
        cells = []
        for j, col in enumerate(cols):
            if cut_cols and j == len(cols) - 1:
                cells.append(Text("...", style="dim"))
            hit = at.get((row, col))
            if hit:
                r, devs = hit
                cells.append(Text(f"{_label(devs, names)}\n{_fmt(r)}", style=f"bold {_color(colors, r)}"))
            else:
                cells.append(Text("nobody", style="dim"))
        table.add_row(*cells)
    return table


def _device_view(grid: np.ndarray, ranges, colors, names, left_out) -> Table:
    drawn_rows, cut_rows = _drawn(grid.shape[0])
    drawn_cols, cut_cols = _drawn(grid.shape[1])
    if cut_rows or cut_cols:
        left_out.append(f"the device view draws {len(drawn_rows) * len(drawn_cols)} of {grid.size} devices "
                        f"({grid.shape[0]}x{grid.shape[1]})")
    table = Table(box=box.ROUNDED, show_header=False, show_lines=True, title="devices")
    for _ in range(len(drawn_cols) + cut_cols):
        table.add_column(justify="center")
    for i in drawn_rows:
        if cut_rows and i == grid.shape[0] - 1:
            table.add_row(*[Text("...", style="dim")] * (len(drawn_cols) + cut_cols))
        cells = []
        for j in drawn_cols:
            if cut_cols and j == grid.shape[1] - 1:
                cells.append(Text("...", style="dim"))
            dev = int(grid[i, j])
            r = ranges[dev]
            text = "nothing" if r is None else _fmt(r)
            cells.append(Text(f"dev {names[dev]}\n{text}", style="dim" if r is None else _color(colors, r)))
        table.add_row(*cells)
    return table


def show_sharding(shape: Sequence[int], sharding: Sharding, *, num_devices: int | None = None,
                  device_names: Sequence[str] | None = None, console: Console | None = None,
                  color: bool | None = None) -> str:
    """Prints the picture (to ``console``, default stdout) and returns it as plain text.

    ``color``: None lets rich decide (a terminal, unless NO_COLOR is set;
    FORCE_COLOR forces it); True or False force it on or off."""
    renderable = render_sharding(shape, sharding, num_devices, device_names)
    recorder = Console(record=True, file=io.StringIO(), width=(console.width if console else 120))
    recorder.print(renderable)
    if console is None:
        console = Console() if color is None else Console(force_terminal=color, no_color=not color)
    console.print(renderable)
    return recorder.export_text()
