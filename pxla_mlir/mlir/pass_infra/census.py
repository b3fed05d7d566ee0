"""Which op names a module holds, taken once and shared by the passes of a
pass-manager run.

Most pxla passes act on a few kinds of ops (the placeholders are custom
calls; elision looks at collectives), and a large module of plain
arithmetic holds none of them. A pass that declares the ops it acts on
(``ModulePass.acts_on``) is skipped when the census says the module holds
none, instead of each pass walking the module to find nothing.

The census is only as good as the module it was taken of: it is forgotten
whenever the module may have changed since, i.e. after any pass that ran
and may rewrite (``checks_only`` False) and before the first pxla pass after
jaxlib passes (which the bridge cannot see run). A skipped pass changes
nothing, so a run of skipped passes shares one census: one walk for all.
"""

from __future__ import annotations

from jaxlib.mlir import ir

__all__ = ["Census"]


class Census:
    """The op names of the module a pass-manager run is rewriting, or not known."""

    def __init__(self) -> None:
        self._names: frozenset[str] | None = None

    def forget(self) -> None:
        """The module may have changed: the next question walks it again."""
        self._names = None

    def holds_any(self, module: ir.Operation, names: frozenset[str]) -> bool:
        """Whether ``module`` holds an op named in ``names`` (walking it only when not known)."""
        if self._names is None:
            self._names = _names_in(module)
        return not self._names.isdisjoint(names)


def _names_in(module: ir.Operation) -> frozenset[str]:
    seen: set[str] = set()
    add, advance = seen.add, ir.WalkResult.ADVANCE

    def visit(op):
        add(op.name)
        return advance

    module.walk(visit, ir.WalkOrder.PRE_ORDER)
    return frozenset(seen)
