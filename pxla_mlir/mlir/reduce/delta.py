"""The delta loop: from an interesting module to the smallest interesting one
the reductions reach.

Each reduction lists its units on the current best module; the loop tries to
apply them all at once, then in halves, quarters, ... (llvm-reduce's chunks,
Zeller's delta debugging), keeping every chunk whose candidate is smaller and
still interesting. With ``jobs`` > 1 the next ``jobs`` chunks are tested
together and the first interesting one in chunk order wins, so the result
does not depend on which test finishes first. Rounds over every reduction
repeat until one changes nothing. Ctrl-C stops the loop; the best module so
far is the outcome.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import cast

from jaxlib.mlir import ir

from pxla_mlir.mlir.reduce.candidate import Printer, Size
from pxla_mlir.mlir.reduce.evaluate import Counts, Evaluator
from pxla_mlir.mlir.reduce.progress import Progress
from pxla_mlir.mlir.reduce.reductions import Reduction, Rewrite

__all__ = ["Outcome", "Reducer"]

Change = Callable[[ir.Module], None]


@dataclasses.dataclass(frozen=True)
class Outcome:
    text: str
    size: Size
    start: Size
    counts: Counts
    seconds: float
    rounds: int
    interrupted: bool


class Reducer:
    def __init__(self, printer: Printer, evaluator: Evaluator, reductions: Sequence[Reduction | Rewrite],
                 progress: Progress | None = None):
        self.printer, self.evaluator, self.reductions = printer, evaluator, list(reductions)
        self.progress = progress or Progress(enabled=False)
        self._best: tuple[str, Size] = ("", Size(0, 0))  # one attribute: Ctrl-C never splits text from size
        self._round, self._where = 0, ""
        self._started = time.monotonic()

    @property
    def best(self) -> str:
        return self._best[0]

    @property
    def best_size(self) -> Size:
        return self._best[1]

    def run(self, text: str, size: Size) -> Outcome:
        """Reduces ``text`` (of ``size``), which the test finds interesting."""
        self._best = (text, size)
        self._started = time.monotonic()
        interrupted = False
        try:
            while True:
                self._round += 1
                before = self.best_size
                for reduction in self.reductions:
                    if isinstance(reduction, Rewrite):
                        self._rewrite(reduction)
                    else:
                        self._delta(cast(Reduction, reduction))
                if self.best_size == before:
                    break
        except KeyboardInterrupt:
            interrupted = True
        finally:
            self.progress.clear()
        return Outcome(*self._best, size, self.evaluator.counts, time.monotonic() - self._started,
                       self._round, interrupted)

    # -- one reduction ----------------------------------------------------------------------------------

    def _rewrite(self, rewrite: Rewrite) -> None:
        variants = rewrite.variants()
        i = 0
        while i < len(variants):
            self._where = rewrite.name
            batch = variants[i:i + self.evaluator.jobs]
            won = self._first_interesting(
                [lambda m, v=v: rewrite.apply_variant(m, v) for v in batch], self.best, rewrite.name)
            i += len(batch) if won is None else won + 1

    def _delta(self, reduction: Reduction) -> None:
        base = self.best
        module = self.printer.parse(base)
        with self.printer.ctx, ir.Location.unknown():
            units = reduction.units(module)
        del module
        if not units:
            return
        gone: set[int] = set()
        chunks = [range(len(units))]
        while True:
            kept: list[range] = []
            i = 0
            while i < len(chunks):
                batch = chunks[i:i + self.evaluator.jobs]
                self._where = f"{reduction.name} ({len(gone)}/{len(units)} gone, chunks of {len(batch[0])})"
                changes = [self._applying(reduction, units, gone | set(chunk)) for chunk in batch]
                won = self._first_interesting(changes, base, reduction.name)
                if won is None:
                    kept += batch
                    i += len(batch)
                else:
                    kept += batch[:won]
                    gone |= set(batch[won])
                    i += won + 1
            if all(len(c) == 1 for c in kept):
                return
            chunks = [half for c in kept for half in _halves(c)]

    def _applying(self, reduction: Reduction, units: list, chosen: set[int]) -> Change:
        picked = [units[j] for j in sorted(chosen)]
        return lambda m: reduction.apply(m, picked)

    def _first_interesting(self, changes: list[Change], base: str, name: str) -> int | None:
        """Makes each change's candidate from ``base`` and tests the smaller ones together; the index of the
        first interesting one (now the best), or None."""
        counts = self.evaluator.counts
        made: list[tuple[int, str, Size]] = []
        for index, change in enumerate(changes):
            candidate = self.printer.made(base, change)
            if candidate is None:
                counts.invalid += 1
            elif not candidate[1] < self.best_size:
                counts.larger += 1
            else:
                made.append((index, *candidate))
        self._show()
        if not made:
            return None
        verdicts = self.evaluator.verdicts([text for _, text, _ in made])
        for (index, text, size), verdict in zip(made, verdicts):
            if verdict.interesting:
                self.progress.log(f"{name}: {self.best_size.ops} -> {size.ops} ops ({self.best_size.chars} -> "
                                  f"{size.chars} characters)")
                self._best = (text, size)
                self._show()
                return index
        return None

    def _show(self) -> None:
        counts = self.evaluator.counts
        seconds = time.monotonic() - self._started
        self.progress.show(f"reduce: {self.best_size.ops} ops left, {counts.tested} tested in {seconds:.0f} s; "
                           f"round {self._round}, {self._where}")


def _halves(chunk: range) -> list[range]:
    if len(chunk) <= 1:
        return [chunk]
    middle = chunk.start + len(chunk) // 2
    return [range(chunk.start, middle), range(middle, chunk.stop)]
