"""The one donation check of every call path.

jaxlib 0.10.2 segfaults on a donated array that is already deleted (consumed
by an earlier call) and on an array donated and passed again in the same
call (in jax.pmap and jax.jit too), so both are refused before launching.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import compress

import jax

from pxla_mlir.jaxbridge.jax_internals import ArrayImpl

__all__ = ["check_donations", "clear_to_donate"]

_is_deleted = ArrayImpl.is_deleted


def clear_to_donate(leaves: Sequence) -> bool:
    """Is every leaf a live jax.Array passed once? One C-level pass that clears
    a training step's call of both checks (deleted arguments, donation twice);
    False sends the call to the checks that name the culprit."""
    try:
        return len(set(map(id, leaves))) == len(leaves) and not any(map(_is_deleted, leaves))
    except TypeError:  # a leaf is not a jax.Array (numpy, a scalar)
        return False


def check_donations(leaves: Sequence, donated: Sequence[bool], where: Callable[[int], str]) -> None:
    """Raises jax's RuntimeError for a deleted donated array, or an array
    donated at one flat position and passed at another; ``where(i)`` names
    flat position ``i`` for the message (``argument 0``, ``'y'``)."""
    # The usual call (no leaf passed twice, no donated array deleted) is cleared at C speed: this runs on
    # every step of a training loop. Anything else takes the loop below, which names the culprit.
    if len(set(map(id, leaves))) == len(leaves):
        try:
            if not any(map(_is_deleted, compress(leaves, donated))):
                return
        except TypeError:  # a donated leaf is not a jax.Array (numpy, a scalar): the loop sorts them out
            pass
    donors: dict[int, int] = {}
    for i, (x, d) in enumerate(zip(leaves, donated)):
        if not d or not isinstance(x, jax.Array):
            continue
        if x.is_deleted():
            raise RuntimeError(f"Array has been deleted with shape={x.aval.str_short()}: {where(i)} was donated to "
                               f"an earlier call (donate_argnums) or deleted; pass a live array (a donated array "
                               f"cannot be used again)")
        if id(x) in donors:
            _raise_donated_twice(where(donors[id(x)]), where(i))
        donors[id(x)] = i
    if not donors:
        return
    for j, x in enumerate(leaves):
        i = donors.get(id(x))
        if i is not None and i != j:
            _raise_donated_twice(where(i), where(j))


def _raise_donated_twice(donated_at: str, used_at: str):
    raise RuntimeError(f"Attempt to use a buffer that was previously donated in the same call: the array donated "
                       f"as {donated_at} is also {used_at} (`f(donate(a), a)`); pass a copy (jnp.copy(a)) in one of "
                       f"the places, or do not donate it")
