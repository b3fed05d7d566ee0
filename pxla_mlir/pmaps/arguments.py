"""pmap's view of a call: static vs mapped arguments, in_axes/out_axes as
pytree prefixes, the axis size, and the per-shard avals, with jax-grade
error messages for every mistake."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np
from jax import tree_util

from ..distributed.shares import global_avals, share_note
from ..jax_internals import api_util, core
from ..stages import Signature

__all__ = ["Call", "examine_call", "flatten_out_axes", "plain_aval"]


class PmapUsageError(ValueError):
    """A call that pmap cannot map; the message says which argument and why."""


@dataclasses.dataclass(frozen=True)
class Call:
    static_args: tuple  # (argnum, value) pairs
    in_tree: Any
    flat_args: list
    in_axes: tuple  # per flat arg: int >= 0 or None
    global_avals: tuple
    axis_size: int

    @property
    def shard_avals(self) -> list:
        return [core.mapped_aval(self.axis_size, a, av) if a is not None else av
                for av, a in zip(self.global_avals, self.in_axes)]

    def flat_function(self, fun):
        """``fun`` on flat dynamic leaves (statics put back in place), and a
        dict whose "tree" is the output pytree once it has been traced."""
        static = dict(self.static_args)
        nargs = len(static) + len(self.in_tree.children())
        store = {}

        def flat_fun(*leaves):
            dyn = iter(tree_util.tree_unflatten(self.in_tree, leaves))
            args = [static[i] if i in static else next(dyn) for i in range(nargs)]
            flat_out, store["tree"] = tree_util.tree_flatten(fun(*args))
            return flat_out

        return flat_fun, store

    def signature(self, out_tree) -> Signature:
        return Signature(self.in_tree, out_tree, tuple(n for n, _ in self.static_args))

    def donated(self, donate_argnums: tuple, nargs: int) -> tuple:
        """One donation flag per flat argument (negative argnums count from the end)."""
        donate = {n % nargs for n in donate_argnums} if nargs else set()
        static = {n for n, _ in self.static_args}
        positions = [i for i in range(nargs) if i not in static]
        return tuple(i in donate for i, child in zip(positions, self.in_tree.children())
                     for _ in range(child.num_leaves))


def plain_aval(x) -> core.ShapedArray:
    """The aval of an argument, without the sharding a jax.Array carries."""
    aval = core.shaped_abstractify(x)
    return core.ShapedArray(aval.shape, aval.dtype, weak_type=aval.weak_type)


def _check_array_like(x, where: str) -> None:
    if isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)) or hasattr(x, "__jax_array__") \
            or isinstance(x, core.Tracer) or (hasattr(x, "shape") and hasattr(x, "dtype")):
        return
    raise TypeError(f"pmap argument {where} of type {type(x).__name__} is not an array; pass arrays or scalars, "
                    f"or list its position in static_broadcasted_argnums")


def _keystr(path) -> str:
    return "args" + tree_util.keystr(path)


def examine_call(args: Sequence, kwargs: dict, *, in_axes, static_argnums: tuple, axis_size: int | None,
                 fn_name: str) -> Call:
    if kwargs:
        raise TypeError(f"pmap-ed function {fn_name!r} takes positional arguments only, got keywords "
                        f"{sorted(kwargs)}")
    for n in static_argnums:
        if not -len(args) <= n < len(args):
            raise PmapUsageError(f"static_broadcasted_argnums {n} is out of range for {len(args)} arguments")
    static_set = {n % len(args) for n in static_argnums} if args else set()
    static = []
    for n in sorted(static_set):
        try:
            hash(args[n])
        except TypeError:
            raise TypeError(f"static argument {n} of {fn_name!r} (type {type(args[n]).__name__}) must be "
                            f"hashable") from None
        static.append((n, args[n]))
    dyn_args = tuple(a for i, a in enumerate(args) if i not in static_set)
    if isinstance(in_axes, (tuple, list)) and len(in_axes) == len(args) and static_set:
        in_axes = tuple(a for i, a in enumerate(in_axes) if i not in static_set)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    paths_and_leaves, in_tree = tree_util.tree_flatten_with_path(dyn_args)
    flat = [x for _, x in paths_and_leaves]
    axes = api_util.flatten_axes("pmap in_axes", in_tree, in_axes)
    norm_axes, avals = [], []
    for (path, x), a in zip(paths_and_leaves, axes):
        _check_array_like(x, _keystr(path))
        aval = plain_aval(x)
        avals.append(aval)
        if a is None:
            norm_axes.append(None)
            continue
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise PmapUsageError(f"pmap in_axes leaves must be int or None, got {a!r} for {_keystr(path)}")
        if not -aval.ndim <= a < aval.ndim:
            raise PmapUsageError(f"pmap in_axes {a} is out of range for {_keystr(path)} with shape {aval.shape}"
                                 + (" (a scalar cannot be mapped; use in_axes None for it)" if aval.ndim == 0
                                    else ""))
        norm_axes.append(int(a) % aval.ndim)
    avals = global_avals(flat, avals, norm_axes, lambda i: _keystr(paths_and_leaves[i][0]))  # multi-process
    size = _axis_size(paths_and_leaves, avals, norm_axes, axis_size)
    return Call(tuple(static), in_tree, flat, tuple(norm_axes), tuple(avals), size)


def _axis_size(paths_and_leaves, avals, axes, given: int | None) -> int:
    mapped = [(path, av, a) for (path, _), av, a in zip(paths_and_leaves, avals, axes) if a is not None]
    sizes = {av.shape[a] for _, av, a in mapped}
    if given is not None:
        sizes.add(int(given))
    if not sizes:
        raise PmapUsageError("pmap needs at least one mapped argument (in_axes not None) or axis_size=")
    if len(sizes) > 1:
        lines = [f"  * {_keystr(p)} has shape {av.shape} and axis {a} is to be mapped" for p, av, a in mapped]
        if given is not None:
            lines.append(f"  * axis_size={given} was given")
        raise PmapUsageError("pmap got inconsistent sizes for array axes to be mapped:\n" + "\n".join(lines)
                             + share_note())
    return sizes.pop()


def flatten_out_axes(out_tree, out_axes, out_avals: Sequence) -> tuple:
    """out_axes (a pytree prefix of the output) per flat output, normalized
    against the rank of the *global* output (one more than the body's)."""
    if isinstance(out_axes, list):
        out_axes = tuple(out_axes)
    axes = api_util.flatten_axes("pmap out_axes", out_tree, out_axes)
    out = []
    for i, (a, aval) in enumerate(zip(axes, out_avals)):
        if a is None:
            out.append(None)
            continue
        rank = aval.ndim + 1
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool) or not -rank <= a < rank:
            raise PmapUsageError(f"pmap out_axes {a!r} is out of range for output {i} of shape {aval.shape} "
                                 f"(the mapped output has {rank} dimensions)")
        out.append(int(a) % rank)
    return tuple(out)
