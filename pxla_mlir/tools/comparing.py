"""Comparing results: two runs of a module (``pxla-mlir run --compare``), a
module and itself after a pipeline, or a run and saved ``.npy`` files.

Floating and complex results agree when every element is within
``atol + rtol * |expected|`` (numpy's ``isclose``), with NaN exactly where
the expected result has NaN and infinities equal; integers and bools must be
equal. Each result gets one row: its type, the largest absolute and relative
error, and whether it agrees.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

__all__ = ["RTOL", "ATOL", "Row", "compare", "table"]

#: numpy's allclose defaults.
RTOL, ATOL = 1e-5, 1e-8


@dataclasses.dataclass(frozen=True)
class Row:
    index: int
    type: str  # dtype[dims] of the result
    max_abs: float | None  # None: not comparable (another shape or dtype)
    max_rel: float | None
    agrees: bool
    why: str = ""  # what differs, when it is not the numbers


def _type(a: np.ndarray) -> str:
    return f"{a.dtype.name}[{','.join(map(str, a.shape))}]"


def _kind(dtype) -> str:
    import jax.numpy as jnp

    if jnp.issubdtype(dtype, jnp.complexfloating):
        return "complex"
    if jnp.issubdtype(dtype, jnp.floating):
        return "float"
    return "exact"  # integers, bools


def compare_one(index: int, got, want, rtol: float = RTOL, atol: float = ATOL) -> Row:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return Row(index, _type(got), None, None, False, f"{_type(got)} against {_type(want)}")
    kind = _kind(got.dtype)
    if kind == "exact":
        a, b = got.astype(np.float64), want.astype(np.float64)  # for the error columns only
        agrees = bool(np.array_equal(got, want))
        why = "" if agrees else f"{int(np.count_nonzero(got != want))} elements differ (compared exactly)"
    else:
        wide = np.complex128 if kind == "complex" else np.float64
        a, b = got.astype(wide), want.astype(wide)
        close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        agrees = bool(close.all())
        nan_a, nan_b = np.isnan(a), np.isnan(b)
        if (nan_a != nan_b).any():
            why = f"NaN at {int(np.count_nonzero(nan_a != nan_b))} other positions"
        else:
            why = "" if agrees else f"{int(np.count_nonzero(~close))} elements differ"
    finite = np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: those elements are not counted
        err = np.abs(np.subtract(a, b, where=finite, out=np.zeros(a.shape, a.dtype)))
    scale = np.abs(b)
    rel = np.divide(err, scale, where=finite & (scale > 0), out=np.zeros(a.shape))
    return Row(index, _type(got), float(err.max(initial=0.0)), float(rel.max(initial=0.0)), agrees, why)


def compare(got: Sequence, want: Sequence, rtol: float = RTOL, atol: float = ATOL) -> list[Row]:
    """One row per result; a result missing on either side is a row that differs."""
    rows = [compare_one(i, g, w, rtol, atol) for i, (g, w) in enumerate(zip(got, want))]
    for i in range(len(rows), max(len(got), len(want))):
        side = got if i < len(got) else want
        rows.append(Row(i, _type(np.asarray(side[i])), None, None, False,
                        "only in this run" if i < len(got) else "missing from this run"))
    return rows


def _number(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def table(rows: Sequence[Row]) -> str:
    width = max([len(r.type) for r in rows] + [len("type")])
    lines = [f"  {'result':<7} {'type':<{width}}  {'max abs error':>13}  {'max rel error':>13}  verdict"]
    for r in rows:
        verdict = "agree" if r.agrees else "DIFFER" + (f": {r.why}" if r.why else "")
        lines.append(f"  {r.index:<7} {r.type:<{width}}  {_number(r.max_abs):>13}  {_number(r.max_rel):>13}  {verdict}")
    return "\n".join(lines)
