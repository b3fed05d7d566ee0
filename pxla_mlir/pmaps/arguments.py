"""pmap's view of a call: static vs mapped arguments, keyword arguments,
in_axes/out_axes as pytree prefixes, the axis size, donation and the
per-shard avals, with jax's error messages (and more detail) for every
mistake. Options are checked when the pmap is made, as jax.pmap does."""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import jax
import numpy as np
from jax import tree_util

from ..distributed.shares import global_avals, share_note
from ..jax_internals import api_util, core
from ..stages import Signature

__all__ = ["Call", "examine_call", "flatten_out_axes", "plain_aval", "argnums", "check_axis_size",
           "check_devices", "check_donation", "check_outputs", "BoundMethod"]


class PmapUsageError(ValueError):
    """A call that pmap cannot map; the message says which argument and why."""


# -- options, checked when the pmap is made ------------------------------------------------------

def _is_int(n) -> bool:
    return isinstance(n, (int, np.integer)) and not isinstance(n, bool)


def argnums(value, what: str) -> tuple[int, ...]:
    """``static_broadcasted_argnums`` / ``donate_argnums`` as a tuple of ints."""
    if _is_int(value):
        return (int(value),)
    items = None
    if not isinstance(value, (str, bytes)):
        try:
            items = tuple(value)
        except TypeError:
            pass
    if items is None or not all(_is_int(n) for n in items):
        raise TypeError(f"{what} must be an int or a sequence of ints (indices of positional arguments), got "
                        f"{value!r}")
    return tuple(int(n) for n in items)


def check_donation(donate: tuple, static: tuple) -> None:
    both = sorted(set(donate) & set(static))
    if both:
        raise ValueError(f"`static_argnums` {sorted(set(static))} and `donate_argnums` {sorted(set(donate))} cannot "
                         f"intersect: argument {both[0]} is static (a compile-time constant, no buffer to donate); "
                         f"drop it from one of them")


def check_axis_size(axis_size):
    if axis_size is None:
        return None
    if not _is_int(axis_size):
        raise TypeError(f"pmap axis_size must be a positive int, got {axis_size!r} of type "
                        f"{type(axis_size).__name__}")
    if axis_size < 1:
        raise ValueError(f"pmap axis_size must be a positive int, got {axis_size}: a pmap runs one shard per "
                         f"device, so it needs at least one")
    return int(axis_size)


def check_devices(devices) -> tuple | None:
    """``devices=`` as a tuple of distinct jax devices of one platform (or None)."""
    if devices is None:
        return None
    try:
        devs = tuple(devices)
    except TypeError:
        raise ValueError(f"'devices' argument to pmap must be a sequence of jax devices (e.g. jax.devices()[:4]) "
                         f"or None, got {devices!r}") from None
    if not devs:
        raise ValueError("'devices' argument to pmap must be non-empty, or None. Pass the devices to run on "
                         "(e.g. jax.devices()[:4]), or None for the first local devices")
    for i, d in enumerate(devs):
        if not isinstance(d, jax.Device):
            hint = f"; use e.g. jax.devices({d!r})[:{len(devs)}]" if isinstance(d, str) else ""
            raise ValueError(f"'devices' argument to pmap must hold jax devices (from jax.devices()), but "
                             f"devices[{i}] is {d!r} of type {type(d).__name__}{hint}")
    seen: dict = {}
    for i, d in enumerate(devs):
        if d in seen:
            raise ValueError(f"'devices' argument to pmap lists {d} twice (devices[{seen[d]}] and devices[{i}]); "
                             f"each device runs one shard, so pass distinct devices (e.g. jax.devices()[:"
                             f"{len(devs)}])")
        seen[d] = i
    platforms = sorted({d.platform for d in devs})
    if len(platforms) > 1:
        raise ValueError(f"'devices' argument to pmap mixes platforms {platforms}; all devices of a pmap must be "
                         f"identical")
    return devs


class BoundMethod:
    """A pmap or pxla_mlir.jit decorating a method, bound to an instance:
    ``self`` is argument 0 (so static_broadcasted_argnums=0 makes it static)."""

    def __init__(self, mapped, obj):
        self.mapped, self.obj = mapped, obj

    def __call__(self, *args, **kwargs):
        return self.mapped(self.obj, *args, **kwargs)

    def lower(self, *args, **kwargs):
        return self.mapped.lower(self.obj, *args, **kwargs)


# -- a call ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Call:
    static_args: tuple  # (argnum, value) pairs
    in_tree: Any  # of (dynamic positional args, keyword args)
    flat_args: list
    in_axes: tuple  # per flat arg: int >= 0 or None
    global_avals: tuple
    axis_size: int
    nargs: int  # positional arguments, static ones included

    @property
    def shard_avals(self) -> list:
        return [core.mapped_aval(self.axis_size, a, av) if a is not None else av
                for av, a in zip(self.global_avals, self.in_axes)]

    def flat_function(self, fun, fn_name: str):
        """``fun`` on flat dynamic leaves (statics put back in place), and a
        dict whose "tree" is the output pytree once it has been traced."""
        static = dict(self.static_args)
        store = {}

        def flat_fun(*leaves):
            dyn_args, kwargs = tree_util.tree_unflatten(self.in_tree, leaves)
            dyn = iter(dyn_args)
            args = [static[i] if i in static else next(dyn) for i in range(self.nargs)]
            out = fun(*args, **kwargs)
            flat_out, store["tree"] = tree_util.tree_flatten(out)
            check_outputs(out, fn_name)
            return flat_out

        return flat_fun, store

    def signature(self, out_tree) -> Signature:
        positional, kwargs = self.in_tree.children()
        return Signature(positional, out_tree, self.static_args, kwargs_tree=kwargs)

    def donated(self, donate_argnums: tuple) -> tuple:
        """One donation flag per flat argument, as jax.pmap: argnums out of
        range are ignored (negative ones count from the end), keyword
        arguments are never donated."""
        n = self.nargs
        donate = {d % n for d in donate_argnums if -n <= d < n}
        static = {i for i, _ in self.static_args}
        positions = [i for i in range(n) if i not in static]
        positional, kwargs = self.in_tree.children()
        return tuple(i in donate for i, child in zip(positions, positional.children())
                     for _ in range(child.num_leaves)) + (False,) * kwargs.num_leaves


def check_outputs(out, fn_name: str) -> None:
    """A map body must return arrays (jax's own error, deep in tracing, is
    ``NoneType has no len()``)."""
    for path, leaf in tree_util.tree_flatten_with_path(out)[0]:
        if not (isinstance(leaf, core.Tracer) or core.valid_jaxtype(leaf)):
            where = "output" + tree_util.keystr(path) if path else "its output"
            raise TypeError(f"Value {leaf!r} of type {type(leaf).__name__} is not a valid JAX type: the function "
                            f"{fn_name!r} returned it as {where}. Return arrays or scalars (or pytrees of them); "
                            f"build other values from the results after the call")


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
    """``args[0]['w']`` / ``kwargs['y']`` from a path into (args, kwargs)."""
    head, *rest = path
    return ("args" if head.idx == 0 else "kwargs") + tree_util.keystr(tuple(rest))


_KWARGS_NOTE = ("\n\nWhen some arguments are passed by keyword to the pmapped function, they are not included in "
                "the comparison to `in_axes`. Instead, each argument passed by keyword is mapped over its leading "
                "axis.")


def _static_args(args: Sequence, static_argnums: tuple, fn_name: str) -> list:
    if not static_argnums:
        return []
    n = len(args)
    for s in static_argnums:
        if not -n <= s < n:
            raise ValueError(f"pmapped function has static_broadcasted_argnums={static_argnums} but was called "
                             f"with only {n} positional argument{'s' if n != 1 else ''}. All static broadcasted "
                             f"arguments must be passed positionally.")
    static = []
    for i in sorted({s % n for s in static_argnums}):
        try:
            hash(args[i])
        except TypeError:
            raise ValueError(f"Non-hashable static arguments are not supported, as this can lead to unexpected "
                             f"cache-misses. Static argument (index {i}) of type {type(args[i])} for function "
                             f"{fn_name} is non-hashable.") from None
        static.append((i, args[i]))
    return static


def examine_call(args: Sequence, kwargs: dict, *, in_axes, static_argnums: tuple, axis_size: int | None,
                 fn_name: str, kwargs_axis: int | None = 0) -> Call:
    """As jax.pmap: ``in_axes`` is a prefix of the positional arguments; every
    leaf passed by keyword is mapped over ``kwargs_axis`` (0; None for jit)."""
    static = _static_args(args, static_argnums, fn_name)
    static_set = {i for i, _ in static}
    dyn_args = tuple(a for i, a in enumerate(args) if i not in static_set)
    if isinstance(in_axes, (tuple, list)) and len(in_axes) == len(args) and static_set:
        in_axes = tuple(a for i, a in enumerate(in_axes) if i not in static_set)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    paths_and_leaves, in_tree = tree_util.tree_flatten_with_path((dyn_args, dict(kwargs)))
    positional_tree, kwargs_tree = in_tree.children()
    axes = _flat_in_axes(in_tree, in_axes, kwargs_axis, bool(kwargs))
    norm_axes, avals = [], []
    for (path, x), a in zip(paths_and_leaves, axes):
        _check_array_like(x, _keystr(path))
        aval = plain_aval(x)
        avals.append(aval)
        if a is None:
            norm_axes.append(None)
            continue
        if not _is_int(a):
            raise PmapUsageError(f"pmap in_axes leaves must be int or None, got {a!r} for {_keystr(path)}")
        if not -aval.ndim <= a < aval.ndim:
            raise PmapUsageError(f"pmap in_axes {a} is out of range for {_keystr(path)} with shape {aval.shape}"
                                 + (" (a scalar cannot be mapped; use in_axes None for it, or pass it "
                                    "positionally: keyword arguments are always mapped)" if aval.ndim == 0 else ""))
        norm_axes.append(int(a) % aval.ndim)
    flat = [x for _, x in paths_and_leaves]
    avals = global_avals(flat, avals, norm_axes, lambda i: _keystr(paths_and_leaves[i][0]))  # multi-process
    size = _axis_size(paths_and_leaves, avals, norm_axes, axis_size)
    return Call(tuple(static), in_tree, flat, tuple(norm_axes), tuple(avals), size, len(args))


def _flat_in_axes(in_tree, in_axes, kwargs_axis, has_kwargs: bool) -> list:
    if (in_axes is None or _is_int(in_axes)) and (not has_kwargs or in_axes == kwargs_axis):
        return [in_axes] * in_tree.num_leaves  # the common case, without building prefix trees
    try:
        return api_util.flatten_axes("pmap in_axes", in_tree, (in_axes, kwargs_axis), kws=False)
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
        lines = [f"  * {_keystr(p)} has shape {av.shape} and axis {a} is to be mapped" for p, av, a in mapped]
        if given is not None:
            lines.append(f"  * axis_size={given} was given")
        raise PmapUsageError("pmap got inconsistent sizes for array axes to be mapped:\n" + "\n".join(lines)
                             + share_note())
    size = sizes.pop()
    if size == 0:
        path, av, a = mapped[0]
        raise PmapUsageError(f"pmap cannot map an axis of size 0: {_keystr(path)} has shape {av.shape} and axis "
                             f"{a} is to be mapped. A pmap runs one shard per device, so the mapped axis needs at "
                             f"least one element (zero-size inner dimensions are fine)")
    return size


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
        if not _is_int(a) or not -rank <= a < rank:
            raise PmapUsageError(f"pmap out_axes {a!r} is out of range for output {i} of shape {aval.shape} "
                                 f"(the mapped output has {rank} dimensions)")
        out.append(int(a) % rank)
    return tuple(out)
