"""What every map checks the same way: argnums, donation against statics,
``backend=`` against the devices, the outputs of a body, and methods
decorated with a map (``devices=`` itself: :mod:`pxla_mlir.stages.devices`).
Options are checked when the map is made, as jax.pmap does."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from jax import tree_util

from pxla_mlir.errors import entry_point
from pxla_mlir.jaxbridge.jax_internals import api_util, core
from pxla_mlir.jaxbridge.tracebacks import api_boundary, filter_frames
from pxla_mlir.maps.debug_checks import donation_allowed
from pxla_mlir.stages.signature import Signature

if TYPE_CHECKING:
    from jax.core import ShapedArray


__all__ = ["argnums", "check_donation", "check_backend", "check_outputs", "plain_aval",
           "is_int", "BoundMethod", "Call", "examine_broadcast", "static_key", "static_args", "check_array_like", "keystr",
           "Words", "PMAP_WORDS", "JIT_WORDS", "flatten_axes"]


def flatten_axes(name: str, treedef, axis_tree, **kwargs) -> list:
    """jax's ``flatten_axes`` (an axes prefix tree per leaf of ``treedef``), whose
    mismatch text names jax's private placeholder class for a leaf: say "a leaf"."""
    try:
        return api_util.flatten_axes(name, treedef, axis_tree, **kwargs)
    except ValueError as e:
        text = str(e).replace(f"{api_util.PytreeLeaf}", "a leaf (an array or scalar)")
        if text == str(e):
            raise
        raise ValueError(text) from None


class Words(NamedTuple):
    """How a map kind's call errors name it and its static-arguments option."""

    function: str  # "pmapped function"
    argument: str  # "pmap argument"
    static_option: str  # "static_broadcasted_argnums"


PMAP_WORDS = Words("pmapped function", "pmap argument", "static_broadcasted_argnums")
JIT_WORDS = Words("jitted function", "jit argument", "static_argnums")


def is_int(n) -> bool:
    return isinstance(n, (int, np.integer)) and not isinstance(n, bool)


def argnums(value, what: str) -> tuple[int, ...]:
    """``static_broadcasted_argnums`` / ``donate_argnums`` as a tuple of ints."""
    if is_int(value):
        return (int(value),)
    items = None
    if not isinstance(value, (str, bytes)):
        with contextlib.suppress(TypeError):
            items = tuple(value)
    if items is None or not all(is_int(n) for n in items):
        raise TypeError(f"{what} must be an int or a sequence of ints (indices of positional arguments), got "
                        f"{value!r}")
    return tuple(int(n) for n in items)


def check_donation(donate: tuple, static: tuple) -> None:
    both = sorted(set(donate) & set(static))
    if both:
        raise ValueError(f"`static_argnums` {sorted(set(static))} and `donate_argnums` {sorted(set(donate))} cannot "
                         f"intersect: argument {both[0]} is static (a compile-time constant, no buffer to donate); "
                         f"drop it from one of them")


#: ``backend=`` names that jax gives devices of another ``Device.platform``.
_PLATFORM_OF_BACKEND = {"cuda": "gpu", "rocm": "gpu"}


def check_backend(devices, backend, what: str) -> None:
    """``backend=`` and the devices a map runs on (``devices=``, a mesh) name
    one platform: each decides where the program compiles and where its inputs
    go, and two platforms would hand one client's buffers to another's
    executable. Checked on the names alone, without starting that backend."""
    if backend is None or not devices:
        return
    if not isinstance(backend, str):
        raise TypeError(f"{what}: backend must be a platform name such as 'cpu', 'gpu' or 'tpu', got {backend!r}")
    wanted = _PLATFORM_OF_BACKEND.get(backend.lower(), backend.lower())
    have = sorted({d.platform for d in devices})
    if have != [wanted]:
        raise ValueError(f"{what}: backend={backend!r} but its devices are {'/'.join(have).upper()} devices "
                         f"({list(devices)[0]}, ...); pass devices of that platform (jax.devices({backend!r})) or "
                         f"leave out backend=")


class BoundMethod:
    """A map or pxla_mlir.jit decorating a method, bound to an instance:
    ``self`` is argument 0 (so static_broadcasted_argnums=0 makes it static)."""

    def __init__(self, mapped, obj):
        self.mapped, self.obj = mapped, obj

    @entry_point
    def __call__(self, *args, **kwargs):
        try:
            return self.mapped(self.obj, *args, **kwargs)
        except Exception as e:  # an entry point above the map's own (a bare raise adds no frame)
            filter_frames(e)
            raise

    @api_boundary
    def lower(self, *args, **kwargs):
        return self.mapped.lower(self.obj, *args, **kwargs)


def check_outputs(out, fn_name: str) -> None:
    """A map body must return arrays (jax's own error, deep in tracing, is
    ``NoneType has no len()``)."""
    for path, leaf in tree_util.tree_flatten_with_path(out)[0]:
        if not (isinstance(leaf, core.Tracer) or core.valid_jaxtype(leaf)):
            where = "output" + tree_util.keystr(path) if path else "its output"
            raise TypeError(f"Value {leaf!r} of type {type(leaf).__name__} is not a valid JAX type: the function "
                            f"{fn_name!r} returned it as {where}. Return arrays or scalars (or pytrees of them); "
                            f"build other values from the results after the call")


def plain_aval(x) -> ShapedArray:
    """The aval of an argument, without the sharding a jax.Array carries."""
    aval = core.shaped_abstractify(x)
    return core.ShapedArray(aval.shape, aval.dtype, weak_type=aval.weak_type)


def static_key(value):
    """A cache key for a static argument that tells ``1``, ``1.0`` and ``True``
    apart (they hash and compare equal, but trace to other programs), also
    inside tuples, lists and dicts."""
    if type(value) in (tuple, list):
        return type(value), tuple(static_key(v) for v in value)
    if type(value) is dict:
        return dict, tuple((static_key(k), static_key(v)) for k, v in value.items())
    return type(value), value


# -- a call ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Call:
    """A call as the map sees it: static arguments apart, the dynamic ones
    flattened with their avals and mapped axes (all None for pxla_mlir.jit)."""

    static_args: tuple[tuple[int, Any], ...]  # (argnum, value) pairs
    in_tree: Any  # of (dynamic positional args, keyword args): a PyTreeDef, which jaxlib ships no stubs for
    flat_args: list
    in_axes: tuple[int | None, ...]  # per flat arg: int >= 0 or None
    global_avals: tuple[ShapedArray, ...]
    axis_size: int
    nargs: int  # positional arguments, static ones included

    @property
    def key(self) -> tuple:
        """What decides the traced program: pytree, avals, mapped axes, axis size, statics (by type too)."""
        return (self.in_tree, self.global_avals, self.in_axes, self.axis_size,
                tuple((i, static_key(v)) for i, v in self.static_args))

    @property
    def has_tracers(self) -> bool:
        return any(isinstance(x, core.Tracer) for x in self.flat_args)

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

    def donated(self, donate_argnums: tuple[int, ...]) -> tuple[bool, ...]:
        """One donation flag per flat argument, as jax.pmap: argnums out of
        range are ignored (negative ones count from the end), keyword
        arguments are never donated, and nothing is under jax_debug_nans."""
        n = self.nargs
        if not donation_allowed():  # jax_debug_nans: as jax.pmap, nothing is donated
            donate_argnums = ()
        donate = {d % n for d in donate_argnums if -n <= d < n}
        static = {i for i, _ in self.static_args}
        positions = [i for i in range(n) if i not in static]
        positional, kwargs = self.in_tree.children()
        return tuple(i in donate for i, child in zip(positions, positional.children())
                     for _ in range(child.num_leaves)) + (False,) * kwargs.num_leaves


def check_array_like(x, where: str, words: Words = PMAP_WORDS) -> None:
    if isinstance(x, (np.ndarray, np.generic, bool, int, float, complex)) or hasattr(x, "__jax_array__") \
            or isinstance(x, core.Tracer) or (hasattr(x, "shape") and hasattr(x, "dtype")):
        return
    raise TypeError(f"{words.argument} {where} of type {type(x).__name__} is not an array; pass arrays or scalars, "
                    f"or list its position in {words.static_option}")


def keystr(path) -> str:
    """``args[0]['w']`` / ``kwargs['y']`` from a path into (args, kwargs)."""
    head, *rest = path
    return ("args" if head.idx == 0 else "kwargs") + tree_util.keystr(tuple(rest))


def static_args(args: Sequence, static_argnums: tuple, fn_name: str, words: Words = PMAP_WORDS) -> list:
    if not static_argnums:
        return []
    n = len(args)
    for s in static_argnums:
        if not -n <= s < n:
            static = "static broadcasted" if words is PMAP_WORDS else "static"  # jax.pmap's words for pmap
            raise ValueError(f"{words.function} has {words.static_option}={static_argnums} but was called with "
                             f"only {n} positional argument{'s' if n != 1 else ''}. All {static} arguments must be "
                             f"passed positionally.")
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


def examine_broadcast(args: Sequence, kwargs: dict, *, static_argnums: tuple, fn_name: str,
                      words: Words = JIT_WORDS) -> Call:
    """A call whose every argument is broadcast (pxla_mlir.jit): statics apart,
    the rest flattened with their avals."""
    static = static_args(args, static_argnums, fn_name, words)
    static_set = {i for i, _ in static}
    dyn_args = tuple(a for i, a in enumerate(args) if i not in static_set)
    paths_and_leaves, in_tree = tree_util.tree_flatten_with_path((dyn_args, dict(kwargs)))
    for path, x in paths_and_leaves:
        check_array_like(x, keystr(path), words)
    flat = [x for _, x in paths_and_leaves]
    return Call(tuple(static), in_tree, flat, (None,) * len(flat), tuple(plain_aval(x) for x in flat), 1, len(args))
