"""pmap's view of a call: static vs mapped arguments, keyword arguments,
in_axes/out_axes as pytree prefixes, the axis size, donation and the
per-shard avals, with jax's error messages (and more detail) for every
mistake. Options are checked when the pmap is made, as jax.pmap does."""

from __future__ import annotations

from collections.abc import Sequence

from jax import tree_util

from pxla_mlir.distributed.jit_shares import note_pmap
from pxla_mlir.distributed.shares import global_avals, share_note
from pxla_mlir.errors import PxlaUserError
from pxla_mlir.maps.arguments import (
    PMAP_WORDS,
    Call,
    Words,
    check_array_like,
    flatten_axes,
    is_int,
    keystr,
    plain_aval,
    static_args,
)

__all__ = ["PmapUsageError", "examine_call", "flatten_out_axes", "check_axis_size", "check_axes_spec"]


class PmapUsageError(PxlaUserError, ValueError):
    """A call that pmap cannot map; the message says which argument and why."""


# -- options, checked when the pmap is made ------------------------------------------------------

def check_axis_size(axis_size):
    if axis_size is None:
        return None
    if not is_int(axis_size):
        raise TypeError(f"pmap axis_size must be a positive int, got {axis_size!r} of type "
                        f"{type(axis_size).__name__}")
    if axis_size < 1:
        raise ValueError(f"pmap axis_size must be a positive int, got {axis_size}: a pmap runs one shard per "
                         f"device, so it needs at least one")
    return int(axis_size)


def check_axes_spec(axes, what: str) -> None:
    """jax.pmap's TypeError for ``in_axes``/``out_axes`` leaves that are not ints (``False``, ``1.0``, ``'0'``)."""
    if not all(is_int(leaf) for leaf in tree_util.tree_leaves(axes)):
        raise TypeError(f"pmap {what} must be an int, None, or (nested) container with those types as leaves, but "
                        f"got {axes}.")


# -- a call ---------------------------------------------------------------------------------------

_KWARGS_AXIS = 0  # as jax.pmap, an argument passed by keyword is mapped over its leading axis

_KWARGS_NOTE = ("\n\nWhen some arguments are passed by keyword to the pmapped function, they are not included in "
                "the comparison to `in_axes`. Instead, each argument passed by keyword is mapped over its leading "
                "axis.")


def examine_call(args: Sequence, kwargs: dict, *, in_axes, static_argnums: tuple, axis_size: int | None,
                 fn_name: str, devices=None, words: Words = PMAP_WORDS) -> Call:
    """As jax.pmap: ``in_axes`` is a prefix of the positional arguments; every
    leaf passed by keyword is mapped over its axis 0."""
    static = static_args(args, static_argnums, fn_name, words)
    static_set = {i for i, _ in static}
    dyn_args = tuple(a for i, a in enumerate(args) if i not in static_set)
    if isinstance(in_axes, (tuple, list)) and len(in_axes) == len(args) and static_set:
        in_axes = tuple(a for i, a in enumerate(in_axes) if i not in static_set)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    paths_and_leaves, in_tree = tree_util.tree_flatten_with_path((dyn_args, dict(kwargs)))
    positional_tree, kwargs_tree = in_tree.children()
    axes = _flat_in_axes(in_tree, in_axes, _KWARGS_AXIS, bool(kwargs))
    norm_axes, avals = [], []
    for (path, x), a in zip(paths_and_leaves, axes):
        check_array_like(x, keystr(path), words)
        aval = plain_aval(x)
        avals.append(aval)
        if a is None:
            norm_axes.append(None)
            continue
        if not is_int(a):
            raise PmapUsageError(f"pmap in_axes leaves must be int or None, got {a!r} for {keystr(path)}")
        if not -aval.ndim <= a < aval.ndim:
            raise PmapUsageError(f"pmap in_axes {a} is out of range for {keystr(path)} with shape {aval.shape}"
                                 + (" (a scalar cannot be mapped; use in_axes None for it, or pass it "
                                    "positionally: keyword arguments are always mapped)" if aval.ndim == 0 else ""))
        norm_axes.append(int(a) % aval.ndim)
    flat = [x for _, x in paths_and_leaves]
    note_pmap(flat, norm_axes, devices, fn_name)  # a probed pxla_mlir.jit body: its shares
    avals = global_avals(flat, avals, norm_axes, lambda i: keystr(paths_and_leaves[i][0]), devices)  # multi-process
    size = _axis_size(paths_and_leaves, avals, norm_axes, axis_size)
    return Call(tuple(static), in_tree, flat, tuple(norm_axes), tuple(avals), size, len(args))


def _flat_in_axes(in_tree, in_axes, kwargs_axis, has_kwargs: bool) -> list:
    if (in_axes is None or is_int(in_axes)) and (not has_kwargs or in_axes == kwargs_axis):
        return [in_axes] * in_tree.num_leaves  # the common case, without building prefix trees
    try:
        return flatten_axes("pmap in_axes", in_tree, (in_axes, kwargs_axis), kws=False)
    except ValueError as e:
        raise ValueError(str(e) + (_KWARGS_NOTE if has_kwargs else "")) from None


def _axis_size(paths_and_leaves, avals, axes, given: int | None) -> int:
    mapped = [(path, av, a) for (path, _), av, a in zip(paths_and_leaves, avals, axes) if a is not None]
    sizes = {av.shape[a] for _, av, a in mapped}
    if given is not None:
        sizes.add(int(given))
    if not sizes:
        raise PmapUsageError("pmap requires at least one argument with a mapped axis (in_axes not None), or "
                             "axis_size=")
    if len(sizes) > 1:
        lines = [f"  * {keystr(p)} has shape {av.shape} and axis {a} is to be mapped" for p, av, a in mapped]
        if given is not None:
            lines.append(f"  * axis_size={given} was given")
        raise PmapUsageError("pmap got inconsistent sizes for array axes to be mapped:\n" + "\n".join(lines)
                             + share_note())
    size = sizes.pop()
    if size == 0:
        path, av, a = mapped[0]
        raise PmapUsageError(f"pmap cannot map an axis of size 0: {keystr(path)} has shape {av.shape} and axis "
                             f"{a} is to be mapped. A pmap runs one shard per device, so the mapped axis needs at "
                             f"least one element (zero-size inner dimensions are fine)")
    return size


def flatten_out_axes(out_tree, out_axes, out_avals: Sequence) -> tuple:
    """out_axes (a pytree prefix of the output) per flat output, normalized
    against the rank of the *global* output (one more than the body's)."""
    if isinstance(out_axes, list):
        out_axes = tuple(out_axes)
    axes = flatten_axes("pmap out_axes", out_tree, out_axes)
    out = []
    for i, (a, aval) in enumerate(zip(axes, out_avals)):
        if a is None:
            out.append(None)
            continue
        rank = aval.ndim + 1
        if not is_int(a) or not -rank <= a < rank:
            raise PmapUsageError(f"pmap out_axes {a!r} is out of range for output {i} of shape {aval.shape} "
                                 f"(the mapped output has {rank} dimensions)")
        out.append(int(a) % rank)
    return tuple(out)
