"""The "did you mean" every tool appends to a misspelled name, flag or choice."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest", "did_you_mean"]


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate spelled most like ``word`` (difflib's ratio of at least 0.6), or None. A word spelled with
    underscores where the names have hyphens (``pxla_expand_shard``) is matched in its hyphenated form too."""
    names = [str(c) for c in candidates]
    close = difflib.get_close_matches(word, names, n=1) or difflib.get_close_matches(word.replace("_", "-"), names, n=1)
    return close[0] if close else None


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'NAME'?"`` for the candidate spelled most like ``word``, or ``""``."""
    close = closest(word, candidates)
    return f"; did you mean '{close}'?" if close is not None else ""
