"""argparse without abbreviated flags, for pxla-opt and pxla-mlir.

mlir-opt refuses a flag it does not know exactly; argparse would take
``--verify-diag`` for ``--verify-diagnostics``, and ``allow_abbrev=False``
still lets single-dash prefixes through (``-verify-diag``, Python 3.11).
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["ExactArgumentParser"]


class ExactArgumentParser(argparse.ArgumentParser):
    """Flags match only when spelled in full (``-oFILE`` for a one-letter flag still works)."""

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def _get_option_tuples(self, option_string: str):
        # What argparse offers here are prefix matches; keep only '-o' matching '-oFILE'.
        return [t for t in super()._get_option_tuples(option_string) if len(t[1]) == 2]


class Once(argparse.Action):
    """A flag that may be given once, as mlir-opt's (``-p A -p B`` would silently run only B)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        given = getattr(namespace, self.dest, None)
        if given is not None and given != self.default:
            raise argparse.ArgumentError(self, f"given twice ({given!r} and {values!r}); give it once")
        setattr(namespace, self.dest, values)
