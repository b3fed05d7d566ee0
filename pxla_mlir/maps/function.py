"""The callable every map front end returns (pmap, xmap, ``pxla_mlir.jit``).

:class:`MapFunction` owns what they share: the trace, lower and compile
caches under one bounded LRU policy and one key, the lock, the C++ fast
path (:mod:`pxla_mlir.runtime.dispatch`), methods decorated with a map,
``lower`` and ``__call__``. A front end says how a call looks to it:

* ``_examine(args, kwargs)``: the call's flat arguments and its ``key``
  (pytree, avals, mapped axes, static arguments by type and value);
* ``_environment()``: what else the program depends on (xmap: the mesh and
  serial loops in scope; pmap and jit: nothing);
* ``_trace(call, env)``: the traced body (a :class:`Traced`);
* ``_bind(traced, call)``: the map under a transformation (the primitive);
* ``_lower_traced(traced, call, env)``: its ``Lowered``.

The caches belong to (function, options), not to the object
(:mod:`.caches`): every object made with the same function and options
shares them and their C++ dispatcher, as jax.pmap's objects do, and none of
it keeps the function alive. A cache key is (the call's key, the
environment, jax's trace context): jax's config (x64, matmul precision, ...)
and the axis environment decide what tracing gives, so they decide what may
be reused.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

from pxla_mlir.distributed.processes import spans_processes
from pxla_mlir.distributed.shares import host_local_outputs
from pxla_mlir.errors import entry_point
from pxla_mlir.jaxbridge.jax_internals import (
    ArrayImpl,
    axis_env_ref,
    core,
    debug_infs_flag,
    debug_nans_flag,
    eval_trace,
    jit_disabled,
    jit_enabled,
    top_axis_env,
    trace_context,
    trace_ref,
)
from pxla_mlir.jaxbridge.pytree_depth import too_deep
from pxla_mlir.jaxbridge.tracebacks import api_boundary, filter_frames
from pxla_mlir.maps import debug_checks
from pxla_mlir.maps.arguments import BoundMethod
from pxla_mlir.maps.caches import CACHE_SIZE, CacheEntry, CallCache, entry_for
from pxla_mlir.maps.unjitted import same_trace
from pxla_mlir.mlir.sharding.devices import backend_error
from pxla_mlir.mlir.support.stats import STATS
from pxla_mlir.runtime.callbacks import RUNNING_CALLBACK, refuse_inside_callback
from pxla_mlir.runtime.dispatch import NOT_LAUNCHED, FastDispatch, launch_cached
from pxla_mlir.stages.aot import Lowered

__all__ = ["MapFunction", "CallCache", "Traced", "CACHE_SIZE", "PRIVATE"]

#: ``options`` of a map whose caches are its own (not shared with other objects).
PRIVATE = object()


class _Calling(threading.local):
    def __init__(self) -> None:  # on each thread's first use
        # An instance attribute: at class level MapFunction.__get__ would make it a BoundMethod to type checkers.
        self.obj: MapFunction | None = None  # the map object whose call is being dispatched on this thread


_calling = _Calling()


def _resolve_for_caller(env, args: tuple, kwargs: dict):
    """A shared dispatcher's Python path: resolved by the object calling it."""
    obj = _calling.obj
    assert obj is not None  # set around the dispatch that calls this
    return obj._resolve(env, args, kwargs)


class Traced:
    """A traced body; ``cacheable`` is False when it closes over tracers of an
    enclosing transformation (valid for that call only)."""

    cacheable: bool = True


#: A front end's traced body.
TracedT = TypeVar("TracedT", bound=Traced)


class MapFunction(Generic[TracedT]):
    """Shared machinery of the map front ends (see the module docs)."""

    #: How messages name this kind of callable ("pmap", "xmap", "pxla_mlir.jit").
    what: str = "map"

    def __init__(self, fun: Callable, *, static_argnums: Sequence[int] = (), donate_argnums: Sequence[int] = (),
                 options: Hashable = PRIVATE):
        """``options``: everything besides ``fun`` that decides what a call
        traces, lowers and compiles to (the caches are shared by every object
        with the same function and options); ``PRIVATE`` for caches of its own."""
        self.fun = fun
        self.name = getattr(fun, "__name__", "fun")
        self.static_argnums = tuple(static_argnums)
        self.donate_argnums = tuple(donate_argnums)
        self._entry = CacheEntry() if options is PRIVATE else entry_for(fun, (type(self), options))
        self._cache = self._entry.calls
        # Is the environment () on every call? (a front end whose _environment depends on its options says so)
        self._no_environment = type(self)._environment is MapFunction._environment
        functools.update_wrapper(self, fun, updated=())  # never merge fun.__dict__ into ours

    # -- a front end's hooks ---------------------------------------------------------------
    def _examine(self, args: tuple, kwargs: dict):
        raise NotImplementedError

    def _environment(self) -> Hashable:
        return ()

    def _trace(self, call, env) -> TracedT:
        raise NotImplementedError

    def _bind(self, traced: TracedT, call):
        raise NotImplementedError

    def _lower_traced(self, traced: TracedT, call, env) -> Lowered:
        raise NotImplementedError

    def _call_outputs(self, outs: list, compiled) -> tuple[list, bool]:
        """The flat results of a call as the caller gets them, and whether the
        C++ fast path may hand out the executable's own results from now on."""
        exe = compiled.executable
        if not spans_processes(exe.devices):
            return outs, True
        # Multi-process: as jax.pmap, each process gets its part of every result (np.asarray works on it).
        return host_local_outputs(outs, exe.out_shardings), False

    def _deoptimized(self, traced: TracedT, call, env):
        """Runs the body un-jitted on the call's arguments (jax_debug_nans:
        each primitive checked on its own, to name the one making a nan)."""
        raise NotImplementedError

    def _staged(self, call) -> bool:
        """Is this call bound as the primitive (under a transformation, on
        tracers) instead of run?"""
        return not core.trace_state_clean() or call.has_tracers

    # -- calling -----------------------------------------------------------------------------
    @entry_point
    def __call__(self, *args, **kwargs) -> Any:
        # The cached call of a loop is this frame and one call of runtime's launch_cached: keep every other
        # step inline (right after a launch XLA's device threads share the cores, and Python calls add up).
        env = () if self._no_environment else self._environment()
        try:
            if debug_nans_flag.value or debug_infs_flag.value:  # debug_checks.active(): outputs checked in Python
                return self._resolve(env, args, kwargs)[0]
            if trace_ref.value is not eval_trace or axis_env_ref.value is not top_axis_env:  # not at_top_level()
                return self._resolve(env, args, kwargs)[0]  # under a transformation: staged, never launched here
            last = self._entry.dispatchers.latest  # (environment, its hash, FastDispatch): in a loop, this call's
            dispatch = last[2] if last is not None and last[0] is env else self._dispatcher(env)
            if getattr(RUNNING_CALLBACK, "name", None) is not None:
                refuse_inside_callback(dispatch.what)
            previous, _calling.obj = _calling.obj, self  # a miss resolves through it; restored: maps nest in traces
            try:
                arrays = dispatch.arrays
                # (a cheap first guess; while a cache miss is in flight calls take the checked path: FastDispatch)
                if arrays is not None and not dispatch.missing and not kwargs and (not args or type(args[0]) is ArrayImpl):
                    out = launch_cached(arrays, args, dispatch.windowed)
                    if out is not NOT_LAUNCHED:
                        return out
                return dispatch.call(args, kwargs)
            finally:
                _calling.obj = previous
        except Exception as e:  # looked into only when raised: nothing on the way to a launch
            clear = backend_error(e, f"{self.what} {self.name!r}", getattr(self, "backend", None))
            if clear is None:
                filter_frames(e)  # this call is an entry point: the user's frames only (a bare raise adds none)
                raise
            try:
                raise clear from None
            except Exception as shown:
                filter_frames(shown)
                raise

    def _dispatcher(self, env) -> FastDispatch:
        """The C++ dispatcher of this (function, options) in ``env``."""
        dispatchers = self._entry.dispatchers
        dispatch = dispatchers.get(env)
        if dispatch is None:
            dispatch = dispatchers[env] = FastDispatch(
                self.name, functools.partial(_resolve_for_caller, env), static_argnums=self.static_argnums,
                donate_argnums=self.donate_argnums, what=self.what, capacity=CACHE_SIZE)
        return dispatch

    def __get__(self, obj, objtype=None):
        """A map decorating a method binds like the function it wraps (``self``
        is then argument 0, so it can be static)."""
        return self if obj is None else BoundMethod(self, obj)

    def _resolve(self, env, args: tuple, kwargs: dict):
        """The Python path of a call (see :mod:`pxla_mlir.runtime.dispatch`):
        (output, the Compiled that ran or None, its flat arguments)."""
        if jit_disabled():  # as jax.pmap: the body runs on every call (maps/unjitted.py)
            return self._call_without_jit(env, args, kwargs), None, None
        call = self._examine(args, kwargs)
        key = self._key(call, env)
        if self._staged(call):
            return self._bind(self._traced(call, env, key), call), None, None
        compiled = self._cache.compiled.get(key)
        if compiled is None:
            with self._cache.lock:  # a first call traces, lowers and compiles once, also from many threads
                compiled = self._cache.compiled.get(key)
                if compiled is None:
                    traced = self._traced(call, env, key)
                    if not traced.cacheable:  # closes over an enclosing transformation's tracers
                        return self._bind(traced, call), None, None
                    compiled = self._cache.compiled[key] = self._lowered(call, env, key, traced).compile()
        outs = compiled.call_flat(call.flat_args)
        if debug_checks.active():
            debug_checks.check_outputs(outs, what=f"{self.what} {self.name!r}", devices=compiled.executable.devices,
                                       rerun=lambda: self._deoptimized(self._traced(call, env, key), call, env))
        outs, fast = self._call_outputs(outs, compiled)
        return compiled.signature.unflatten(outs), compiled if fast else None, call.flat_args

    def _call_without_jit(self, env, args: tuple, kwargs: dict):
        """A call under ``jax.disable_jit()``: traced anew, run with the cached
        program when the trace is the same, else with a program of its own."""
        call = self._examine(args, kwargs)
        with jit_enabled():  # the key of the cached trace (disable_jit is part of jax's trace context)
            key = self._key(call, env)
        traced = self._traced(call, env, key)  # traces anew under disable_jit
        if self._staged(call) or not traced.cacheable:
            return self._bind(traced, call)
        with self._cache.lock:
            cached = self._cache.traced.get(key)
            compiled = self._cache.compiled.get(key) if cached is not None and same_trace(cached, traced) else None
            if compiled is None:
                compiled = self._lower_traced(traced, call, env).compile()
        return compiled.signature.unflatten(compiled.call_flat(call.flat_args))

    @api_boundary
    def lower(self, *args, **kwargs) -> Lowered:
        try:
            return self._lower_call(args, kwargs)
        except Exception as e:  # a too-deep pytree leaks jax's flattening RecursionError as some other error
            clear = too_deep(e, (args, kwargs), f"the arguments of {self.name!r}.lower()") or \
                backend_error(e, f"{self.what} {self.name!r}.lower()", getattr(self, "backend", None))
            if clear is None:
                raise
            raise clear from None

    def _lower_call(self, args: tuple, kwargs: dict) -> Lowered:
        call = self._examine(args, kwargs)
        env = self._environment()
        key = self._key(call, env)
        with self._cache.lock:
            return self._lowered(call, env, key, self._traced(call, env, key))

    # -- the caches ----------------------------------------------------------------------------
    def _key(self, call, env) -> tuple:
        # jax_debug_nans turns donation off (debug_checks), which changes the program of a donating map.
        nans = bool(self.donate_argnums) and not debug_checks.donation_allowed()
        return call.key, env, trace_context(), nans

    def _traced(self, call, env, key) -> TracedT:
        unjitted = jit_disabled()  # the body runs again, and its trace is not kept
        traced = None if unjitted else self._cache.traced.get(key)
        if traced is None:
            STATS["traces"] += 1
            traced = self._trace(call, env)
            if traced.cacheable and not unjitted:
                self._cache.traced[key] = traced
        return traced

    def _lowered(self, call, env, key, traced: TracedT) -> Lowered:
        keep = traced.cacheable and not jit_disabled()  # under disable_jit the trace is new
        lowered = self._cache.lowered.get(key) if keep else None
        if lowered is None:
            lowered = self._lower_traced(traced, call, env)
            if keep:
                self._cache.lowered[key] = lowered
        return lowered

    def clear_cache(self) -> None:
        """Forgets every traced, lowered and compiled program of this map's
        function and options, of every object made with them (and the C++ fast paths)."""
        self._entry.clear()

