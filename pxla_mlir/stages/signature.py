"""How a call's arguments become a program's flat inputs and its flat
outputs a pytree (:class:`Signature`), and jax's errors for arguments of
other pytrees, shapes or dtypes than compiled for."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from jax import dtypes, tree_util

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.jaxbridge.jax_internals import core, pytree_equality_errors

__all__ = ["Signature", "ArgumentTypeError", "narrowed_without_x64", "X64_FIX", "check_avals"]

#: How to pass 64-bit values (jax narrows them to 32 bits while its 64-bit types are off).
X64_FIX = ("set JAX_ENABLE_X64=1 in the environment (or call jax.config.update('jax_enable_x64', True) before "
           "using jax)")


class ArgumentTypeError(PxlaUserError, TypeError):
    """A call's arguments have other shapes or dtypes than compiled for (jax's ``TypeError``)."""


def narrowed_without_x64(dtype) -> bool:
    """True when jax, as configured now (64-bit types off), would turn a value
    of ``dtype`` (int64, float64, ...) into its 32-bit kind before a call."""
    return dtypes.canonicalize_dtype(dtype) != np.dtype(dtype)


@dataclasses.dataclass(frozen=True)
class Signature:
    """How a call's arguments become the flat inputs, and flat outputs a pytree.

    ``in_tree`` is the pytree of the dynamic positional arguments (those not
    in ``static_args``, (argnum, value) pairs), ``kwargs_tree`` that of the
    keyword arguments (None: no keyword arguments).
    """

    in_tree: Any
    out_tree: Any
    static_args: tuple[tuple[int, Any], ...] = ()
    kwargs_tree: Any = None

    @classmethod
    def flat(cls, n_in: int, n_out: int) -> Signature:
        """Flat leaves in, a list of leaves out."""
        return cls(tree_util.tree_structure((0,) * n_in), tree_util.tree_structure([0] * n_out))

    @property
    def args_tree(self):
        """The pytree of (positional arguments, keyword arguments), as jax's ``in_tree``."""
        return tree_util.treedef_tuple([self.in_tree, self.kwargs_tree or tree_util.tree_structure({})])

    def flatten(self, args: Sequence, kwargs: dict | None = None) -> list:
        """Flat leaves of a call. Static arguments may be left out (as jax's
        ``Compiled`` expects) or passed with the values compiled for."""
        args = tuple(args)
        if self.static_args and len(args) == len(self.in_tree.children()) + len(self.static_args):
            for i, value in self.static_args:
                if not _same(args[i], value):
                    raise TypeError(f"compiled for static argument {i} = {value!r}, called with {args[i]!r}; "
                                    f"lower and compile again for other static values")
            static = {i for i, _ in self.static_args}
            args = tuple(a for i, a in enumerate(args) if i not in static)
        leaves, tree = tree_util.tree_flatten((args, dict(kwargs or {})))
        if tree != self.args_tree:
            raise TypeError(pytree_mismatch(tree, self.args_tree))
        return leaves

    def unflatten(self, outs: Sequence):
        return tree_util.tree_unflatten(self.out_tree, outs)


def _same(a, b) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # an == that does not give a bool
        return False


def pytree_mismatch(got, expected) -> str:
    """jax's message for a call whose arguments are another pytree."""
    errors = list(pytree_equality_errors(got, expected))
    lines = [f"Function compiled with input pytree does not match the input pytree it was called with. There "
             f"are {len(errors)} mismatches, including:"]
    for path, now, seen, why in errors:
        head, *rest = path
        lines.append(f"    * at {('args', 'kwargs')[head.idx]}{tree_util.keystr(tuple(rest))}, seen {seen} but now "
                     f"given {now}, so {why}")
    return "\n".join(lines)


def check_avals(expected: Sequence, leaves: Sequence, args_tree) -> None:
    """jax's TypeError for arguments of other shapes or dtypes than compiled
    for: jax's words (a flat argument is ``'flat_args[i]'``, as jax.pmap names
    it), then where it is in the call's pytree."""
    errors, narrowed = [], []
    for i, (want, x) in enumerate(zip(expected, leaves)):
        got = core.shaped_abstractify(x)
        if (got.shape, got.dtype) != (want.shape, want.dtype):
            errors.append(f"Argument 'flat_args[{i}]' compiled with {want.str_short()} and called with "
                          f"{got.str_short()} (it is {_arg_path(args_tree, i)} of the call)")
            if got.shape == want.shape and narrowed_without_x64(want.dtype) and \
                    dtypes.canonicalize_dtype(want.dtype) == got.dtype:
                narrowed.append(f"{want.dtype.name} into {got.dtype.name}")
    if errors:
        count = f"The first 5 of {len(errors)}" if len(errors) >= 5 else "The"
        fix = ""
        if narrowed:
            fix = (f"\njax's 64-bit types are off (jax_enable_x64), so jax turns {', '.join(sorted(set(narrowed)))} "
                   f"before the call; to pass 64-bit values, {X64_FIX}")
        raise ArgumentTypeError("Argument types differ from the types for which this computation was compiled. "
                                "Perhaps you are calling the compiled executable with a different enable_x64 mode "
                                f"than when it was AOT compiled? {count} mismatches are:\n" + "\n".join(errors[:5])
                                + fix)


def _arg_path(args_tree, index: int) -> str:
    """``args[0]['w']`` / ``kwargs['y']``: where flat argument ``index`` is."""
    path, _ = tree_util.tree_flatten_with_path(args_tree.unflatten(range(args_tree.num_leaves)))[0][index]
    return ("args", "kwargs")[path[0].idx] + tree_util.keystr(tuple(path[1:]))
