"""Calling a map at C++ speed: jax.jit's dispatch in front of our executables.

A map's ``__call__`` goes to jaxlib's C++ ``PjitFunction``. A call whose
signature it has seen (pytree, and per leaf: dtype, shape, weak type,
sharding, committed; static arguments by hash) is placed and launched
without Python. Any other call is a *cache miss*: the map's Python path runs
it (trace, lower, compile once; validate, place, execute), and hands the C++
side fast-path data for that signature only if C++ would feed the
executable exactly the buffers the Python path checked (:func:`_safe`):
jaxlib itself checks nothing, and a wrong device order or byte size
segfaults. Other signatures keep taking the validating Python path.

What stays in Python per call: the in-flight window (one output array per
launch of a program over several CPU devices, see :mod:`.inflight`), the
refusal of a launch from inside a host callback (:mod:`.callbacks`), and,
under the launch lock, a check that no argument is a deleted or donated
array and, for donating maps, that no array is donated twice, O(leaves):
jaxlib 0.10.2 segfaults on either in a program spanning several devices (in
jax.pmap and jax.jit too; see :mod:`.launches`). On one device jaxlib
refuses them with an error, so those launches are not checked first: the
checks run after such an error, to name the argument in jax's words. A
donating launch holds the lock alone, checked or not: the buffers it consumes
may be held by another thread's launch or read (see :mod:`.launches`). A call
with positional jax.Arrays alone (the cached call of a loop) is not
flattened at all: :func:`launch_cached` does all of it in one frame and
hands the arrays to a C++ dispatcher keyed by the arrays themselves
(:attr:`FastDispatch.arrays`).
Other calls go through :meth:`FastDispatch.call`: a map without static
arguments flattens its arguments once, for the checks, and hands C++ the
leaves with their treedef as its one static argument, so a pytree is not
flattened twice (each of the two dispatchers keeps at most ``capacity``
signatures). Host numpy arguments are copied before C++ places them
(:func:`..jaxbridge.placement.copying_shard_arg`), as the Python path copies them: a
write to the array after the call returns cannot reach the launch. Programs
with host callbacks, programs agreed between processes and programs too big
for memory keep the Python path.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import itertools
import threading
from collections.abc import Callable, Sequence

from jax import tree_util

from pxla_mlir.jaxbridge.executables import cpp_dispatch
from pxla_mlir.jaxbridge.jax_internals import ArrayImpl, core, dispatch_flatten, float0, is_extended
from pxla_mlir.jaxbridge.placement import copying_shard_arg, same_platform
from pxla_mlir.jaxbridge.pytree_depth import too_deep
from pxla_mlir.mlir.support.stats import STATS
from pxla_mlir.runtime.donation import check_donations, clear_to_donate
from pxla_mlir.runtime.fastpath import fastpath_data
from pxla_mlir.runtime.inflight import INFLIGHT, INFLIGHT_WINDOW, remember_launch, wait_for_oldest
from pxla_mlir.runtime.launches import LAUNCHES, check_live

__all__ = ["FastDispatch", "first_array", "launch_cached", "NOT_LAUNCHED"]


#: What :func:`launch_cached` returns when it launched nothing (the caller takes the checked path).
NOT_LAUNCHED = object()

_is_deleted = ArrayImpl.is_deleted
_HOLDERS, _CLOSED, _HELD = LAUNCHES.holders, LAUNCHES.closed, LAUNCHES.local


def launch_cached(arrays, args: tuple, windowed: bool):
    """The cached call of a loop: positional ``args`` launched by a map's C++
    dispatcher ``arrays`` (:attr:`FastDispatch.arrays`); NOT_LAUNCHED if one
    of them is not a jax.Array, or is deleted. ``windowed``: the dispatcher's
    :attr:`FastDispatch.windowed`.

    It holds the launch lock shared while it checks that no argument is
    deleted and launches (no deletion comes between the check and the
    launch), then remembers the launch (:mod:`.inflight`). Every step is
    inline, in this one frame: LAUNCHES.acquire() and release() (a shared
    hold is two list operations, see :class:`.launches.LaunchLock`) and
    remember_launch(), so the map's ``__call__`` pays for this one Python
    call and no other.
    """
    took = _HELD.mode is None
    if took:
        _HOLDERS.append(True)
        if _CLOSED:  # an exclusive taker is waiting or holding: wait for it the slow way
            _HOLDERS.pop()
            LAUNCHES.acquire()
        else:
            _HELD.mode = False
    out = None
    try:
        try:
            dead = any(map(_is_deleted, args))  # TypeError: an argument is no jax.Array
        except TypeError:
            dead = None
        if dead is False:
            out = arrays(*args)
    finally:
        if took and _HELD.mode is not None:  # (None: an interrupt in LAUNCHES.released() let go of it)
            _HELD.mode = None
            _HOLDERS.pop()
    if dead is not False:
        return NOT_LAUNCHED
    if windowed:
        fence = out if type(out) is ArrayImpl else first_array(out)
        if fence is not None:  # None: the Python path ran it (and remembered its launch)
            INFLIGHT.append(fence)
            if len(INFLIGHT) > INFLIGHT_WINDOW:
                wait_for_oldest()
    return out


#: resolve(args, kwargs) -> (output pytree, the Compiled that ran, its flat dynamic arguments);
#: Compiled None when the call was not run by an executable (traced, bound).
Resolve = Callable[[tuple, dict], tuple]


class FastDispatch:
    """A map's C++ dispatch (at most ``capacity`` signatures) and the checked
    path of its calls (:meth:`call`).

    The cached call of a loop (positional jax.Arrays alone, no donation) is
    launched by :func:`launch_cached` without entering this class.
    """

    def __init__(self, name: str, resolve: Resolve, *, static_argnums: Sequence[int] = (),
                 donate_argnums: Sequence[int] = (), what: str = "map", capacity: int = 64):
        self._resolve = resolve
        self._name = name
        self.what = f"{what} {name!r}"  # how messages name the map
        self._static = tuple(static_argnums)
        self._donate = tuple(donate_argnums)
        # Without static arguments the arguments are flattened once, here, and C++ gets the leaves with
        # their treedef as its one static argument (it keys the signature by it, as by a pytree it flattens).
        self._flat = not static_argnums
        # Threads in a cache miss of this map. C++ makes a call of the signature being compiled wait for that
        # miss, still holding the launch lock the miss needs again for its launch (a deadlock when the lock is
        # exclusive, as a donating map's is): while one is in flight, calls take the Python path.
        self.missing = 0  # read inline by the map's call
        self._missing_lock = threading.Lock()
        # Positional jax.Arrays alone (most cached calls) need no flattening: C++ gets them as they are.
        self.arrays = None  # called inline by the map's call
        # What its C++ launches need, learnt when a cache miss hands C++ an executable's fast path (before C++
        # can launch that executable itself). jaxlib refuses a deleted or twice-donated buffer with an error
        # on a program of one device, but crashes the process on one spanning several (see .launches): those
        # are checked in Python first, under the launch lock (`checks`); one-device launches leave it to
        # jaxlib and are checked only to name the argument it refused (a donating one still holds the launch
        # lock alone: see `call`). Launches of programs over several CPU devices count against the in-flight
        # window (`windowed`, see .inflight).
        self.checks = True
        self._several = False  # some fast path handed to C++ spans several devices
        self.windowed = False  # read inline by the map's call
        if any(n < 0 for n in static_argnums):  # C++ wants positions; keep the Python path
            self._cpp = self._python
        elif self._flat:
            self._cpp = cpp_dispatch(name, self._unlocked_python_flat, self._cache_miss_flat, (0,),
                                     capacity=capacity, shard_arg=copying_shard_arg)
            if not donate_argnums:
                self.arrays = cpp_dispatch(name, self._unlocked_python, self._cache_miss_arrays, (),
                                           capacity=capacity, shard_arg=copying_shard_arg)
        else:
            self._cpp = cpp_dispatch(name, self._unlocked_python, self._cache_miss, static_argnums,
                                     capacity=capacity, shard_arg=copying_shard_arg)

    def call(self, args: tuple, kwargs: dict):
        """A call at top level that the map's inline path did not launch: any
        arguments, donation; launched under the launch lock, its arguments
        checked first where jaxlib would crash on a deleted one (:attr:`checks`)."""
        checks = self.checks
        # A donating launch deletes buffers that another thread's launch or read may hold (an array's piece on
        # this launch's device, or its copy there): nobody else may launch or read meanwhile, on one device too.
        exclusive = bool(self._donate)
        took = LAUNCHES.acquire(exclusive)
        try:
            try:
                leaves, tree = dispatch_flatten((args, kwargs)) if self._flat else (None, None)
                if checks:
                    self._check(args, kwargs, leaves, tree)
                if self.missing:
                    out = self._unlocked_python_flat(tree, *leaves) if leaves is not None else \
                        self._unlocked_python(*args, **kwargs)
                else:
                    try:
                        out = self._cpp(tree, *leaves) if leaves is not None else self._cpp(*args, **kwargs)
                    except Exception:
                        if not checks:  # jaxlib refused a deleted or twice-donated buffer: name it, in jax's words
                            try:
                                self._check(args, kwargs, leaves, tree)
                            except RuntimeError as named:
                                raise named from None
                        raise
            except Exception as e:
                if isinstance(e, ValueError) and str(e).startswith("Non-hashable static arguments"):
                    out = self._unlocked_python(*args, **kwargs)  # C++ hashes statics first: jax.pmap's words
                else:  # a too-deep pytree leaks the flattening's RecursionError as some other error
                    clear = too_deep(e, (args, kwargs), f"the arguments of {self._name!r}")
                    if clear is None:
                        raise
                    raise clear from None
        finally:
            if took:
                LAUNCHES.release(exclusive)
        if self.windowed:
            # A donating map's first output is mostly its state, donated to the next step: waiting on it then
            # means waiting for every launch (see .inflight). Its last one (a metric) is mostly not donated.
            fence = out if type(out) is ArrayImpl else first_array(out, last=bool(self._donate))
            if fence is not None:
                remember_launch(fence)
        return out

    def _check(self, args: tuple, kwargs: dict, leaves: list | None, tree) -> None:
        """Raises jax's error for a deleted argument or an array donated and passed again."""
        if leaves is None:
            check_live(args, kwargs)
            if self._donate:
                _check_donated(args, kwargs, self._donate)
        elif not (self._donate and clear_to_donate(leaves)):  # a training step: both checks in one pass
            check_live(args, kwargs, leaves)
            if self._donate:
                _check_donated_leaves(leaves, tree, len(args), self._donate)

    def _python(self, *args, **kwargs):
        return self._resolve(args, kwargs)[0]

    def _unlocked_python(self, *args, **kwargs):
        with LAUNCHES.released():  # the Python path takes the lock for its launch itself
            return self._python(*args, **kwargs)

    @contextlib.contextmanager
    def _missing_released(self):
        """A cache miss's block: counted (see ``missing``) from before it lets go of the launch lock."""
        self.checks = True  # until its fast path (if any) is handed to C++: see _fast_path
        with self._missing_lock:
            self.missing += 1
        try:
            with LAUNCHES.released():  # tracing and compiling need not keep deletions waiting
                yield
        finally:
            with self._missing_lock:
                self.missing -= 1

    def _cache_miss(self, *args, **kwargs):
        STATS["python_calls"] += 1
        with self._missing_released():
            out, compiled, flat_args = self._resolve(args, kwargs)
        data = None
        if compiled is not None and not kwargs and all(_typed(args[i]) for i in self._static if i < len(args)):
            data = self._fast_path(compiled, flat_args, out)
        return out, data, False

    def _cache_miss_arrays(self, *args):
        STATS["python_calls"] += 1
        with self._missing_released():
            out, compiled, flat_args = self._resolve(args, {})
        data = None
        # C++ feeds the executable the arguments it got: only if they are the Python path's flat arguments.
        if (compiled is not None and len(flat_args) == len(args)
                and all(a is b for a, b in zip(flat_args, args))):
            data = self._fast_path(compiled, flat_args, out)
        return out, data, False

    def _fast_path(self, compiled, flat_args: Sequence, out):
        """What C++ needs to launch ``compiled`` itself (None: it may not)."""
        data = _fast_path(compiled, flat_args, out)
        if data is not None:
            exe = compiled.executable
            self._several = self._several or len(exe.devices) > 1
            self.windowed = self.windowed or exe.windowed
        self.checks = self._several
        return data

    def _unlocked_python_flat(self, tree, *leaves):
        args, kwargs = tree.unflatten(leaves)
        return self._unlocked_python(*args, **kwargs)

    def _cache_miss_flat(self, tree, *leaves):
        STATS["python_calls"] += 1
        args, kwargs = tree.unflatten(leaves)
        with self._missing_released():
            out, compiled, flat_args = self._resolve(args, kwargs)
        data = None
        # C++ feeds the executable the leaves it got: only if they are the Python path's flat arguments.
        if (compiled is not None and not kwargs and len(flat_args) == len(leaves)
                and all(a is b for a, b in zip(flat_args, leaves))):
            data = self._fast_path(compiled, flat_args, out)
        return out, data, False


_AMBIGUOUS = (bool, int, float, complex, tuple, list, dict, set, frozenset)


def _typed(static) -> bool:
    """Does C++ tell ``static`` apart from every equal value of another type?
    It compares a static argument by hash, ``==`` and its own type only, so
    ``(1,)`` and ``(1.0,)`` would share a program: calls with such statics
    stay in Python, whose cache keys statics by type at every level
    (:func:`pxla_mlir.maps.arguments.static_key`)."""
    if isinstance(static, dict):
        inner = [*static, *static.values()]
    elif isinstance(static, (tuple, list, set, frozenset)):
        inner = list(static)
    else:
        return True
    return not any(isinstance(v, _AMBIGUOUS) for v in inner)


def _fast_path(compiled, flat_args: Sequence, out):
    exe = compiled.executable
    n_const = len(compiled.consts)
    avals, shardings = exe.in_avals[n_const:], exe.in_shardings[n_const:]
    outs, out_tree = tree_util.tree_flatten(out)
    if (exe.has_effects or exe.assembles_results or exe.too_big is not None or not outs
            or not all(type(o) is ArrayImpl for o in outs)
            or len(flat_args) != len(avals)
            or not all(_safe(x, a, s) for x, a, s in zip(flat_args, avals, shardings))):
        return None
    return fastpath_data(exe.xla, outs, out_tree, exe.in_shardings, exe.out_shardings, exe.out_avals,
                         compiled.device_consts())


def _safe(x, aval, sharding) -> bool:
    """Will C++ give the executable exactly what it expects for every future
    call with ``x``'s signature?"""
    if is_extended(aval.dtype) or aval.dtype == float0:
        return False  # keys and float0 travel as other arrays: the Python path converts them
    if type(x) is ArrayImpl:
        if x.shape != aval.shape or x.dtype != aval.dtype or not same_platform(x.sharding, sharding):
            return False  # another platform's array: the Python path transfers it (jax.device_put)
        if x.sharding.num_devices != sharding.num_devices:
            return True  # C++ reshards it through jax's shard_args
        # Passed as is, buffer by buffer: same pieces, same devices, same order.
        return x.sharding == sharding or x.sharding.is_equivalent_to(sharding, x.ndim)
    if isinstance(x, core.Tracer) or hasattr(x, "__jax_array__"):
        return False
    try:  # host values: C++ places them with jax's shard_args on every call
        host = core.shaped_abstractify(x)
    except TypeError:
        return False
    return host.shape == aval.shape and host.dtype == aval.dtype


def first_array(out, last: bool = False):
    """One output array of a launch (the last one with ``last``), in O(depth)
    for the usual containers."""
    at = -1 if last else 0
    while True:
        if type(out) is ArrayImpl:
            return out
        if type(out) in (tuple, list) and out:
            out = out[at]
        elif type(out) is dict and out:
            out = next(reversed(out.values())) if last else next(iter(out.values()))
        else:
            leaves = [x for x in tree_util.tree_leaves(out) if type(x) is ArrayImpl]
            return leaves[at] if leaves else None


def _check_donated(args: tuple, kwargs: dict, donate: Sequence[int]) -> None:
    """:func:`.donation.check_donations` on the arguments of a call, by argnum
    (nothing to check unless a donated argument holds a jax.Array)."""
    leaves, tree = dispatch_flatten((args, kwargs))
    _check_donated_leaves(leaves, tree, len(args), donate)


def _check_donated_leaves(leaves: list, tree, n: int, donate: Sequence[int]) -> None:
    """The same on the flat leaves of ``(args, kwargs)`` (``n`` positional
    arguments), without flattening them again."""
    donated, where = _donation_plan(tree, n, tuple(donate))
    if donated is not None:
        check_donations(leaves, donated, where)


@functools.lru_cache(maxsize=256)
def _donation_plan(tree, n: int, donate: tuple[int, ...]):
    """Which flat leaves of a call of pytree ``tree`` are donated (None: none),
    and how a message names leaf ``j``; once per signature, not per call."""
    positions = {i % n for i in donate if -n <= i < n}
    args_tree, kwargs_tree = tree.children()
    bounds = list(itertools.accumulate((t.num_leaves for t in args_tree.children()), initial=0))
    donated = [False] * bounds[-1] + [False] * kwargs_tree.num_leaves
    for i in positions:
        donated[bounds[i]:bounds[i + 1]] = [True] * (bounds[i + 1] - bounds[i])
    names = kwargs_tree.node_data()[1]
    kw_bounds = list(itertools.accumulate((t.num_leaves for t in kwargs_tree.children()), initial=bounds[-1]))

    def where(j: int) -> str:  # named only for a message
        if j < bounds[-1]:
            return f"argument {bisect.bisect_right(bounds, j) - 1}"
        return f"argument {names[bisect.bisect_right(kw_bounds, j) - 1]!r}"

    return (tuple(donated) if any(donated) else None), where
