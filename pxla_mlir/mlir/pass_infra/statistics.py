"""Pass statistics, as MLIR's: a named counter with a description, declared on the pass class, counted while
the pass runs, reported in mlir-opt's format (``pxla-opt --mlir-pass-statistics``).

    class ElideThings(ModulePass):
        elided = Statistic("things-elided", "things replaced by their operands")

        def run(self, module):
            ...
            self.elided.add()

jaxlib's own passes keep none that its Python bindings can read: the report
names them without counts.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import threading
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["Statistic", "counting", "collecting", "declared", "report"]


@dataclasses.dataclass(frozen=True)
class Statistic:
    """A counter of a pass: ``name`` as the report shows it (``ops-rewritten``) and what it counts."""

    name: str
    description: str

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        return self if instance is None else _Counter(self)


class _Counter:
    """A statistic of the pass running now."""

    def __init__(self, statistic: Statistic):
        self.statistic = statistic

    def add(self, n: int = 1) -> None:
        """Counts ``n`` more (a pass that is not running counts nowhere)."""
        if _state.counts:
            _state.counts[-1][self.statistic.name] += n


class _State(threading.local):
    def __init__(self) -> None:
        self.counts: list[collections.Counter[str]] = []  # the running passes' counts, innermost last
        self.collectors: list[list[tuple[int, collections.Counter[str]]]] = []


_state = _State()


def declared(cls: type) -> list[Statistic]:
    """The statistics a pass class declares, its bases' first, in the order written."""
    out: dict[str, Statistic] = {}
    for klass in reversed(cls.__mro__):
        for value in vars(klass).values():
            if isinstance(value, Statistic):
                out[value.name] = value
    return list(out.values())


@contextlib.contextmanager
def counting(instance: object) -> Iterator[None]:
    """Counts the statistics of ``instance``'s run, and hands them to the report being collected, if any."""
    counts: collections.Counter[str] = collections.Counter()
    _state.counts.append(counts)
    try:
        yield
    finally:
        _state.counts.pop()
        if _state.collectors:
            _state.collectors[-1].append((id(instance), counts))


@contextlib.contextmanager
def collecting() -> Iterator[list[tuple[int, collections.Counter[str]]]]:
    """The statistics of every pass run inside the block (by the pass instance's id)."""
    records: list[tuple[int, collections.Counter[str]]] = []
    _state.collectors.append(records)
    try:
        yield records
    finally:
        _state.collectors.pop()


_RULE = "===" + "-" * 73 + "==="


def report(steps: Sequence[Any], records: Sequence[tuple[int, collections.Counter[str]]],
           elementary: Any) -> str:
    """mlir-opt's pipeline report for ``steps`` (pxla pass instances and jaxlib pass text, which
    ``elementary(text)`` splits into single passes) with the counts ``records`` hold."""
    totals: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for key, counts in records:
        totals[key].update(counts)
    lines = [_RULE, " " * 25 + "... Pass statistics report ...", _RULE, "'builtin.module' Pipeline"]
    for step in steps:
        if isinstance(step, str):
            lines += [f"  {name}" for name in elementary(step)]
            continue
        lines.append(f"  {type(step).__name__}")
        stats = declared(type(step))
        counts = totals.get(id(step), collections.Counter())
        width = max((len(str(counts[s.name])) for s in stats), default=1)
        lines += [f"    ({s.name}) {counts[s.name]:>{width}} - {s.description}" for s in stats]
    return "\n".join(lines) + "\n"
