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

A cache key is (the map's ``_identity``, the call's key, the environment,
jax's trace context): jax's config (x64, matmul precision, ...) and the axis
environment decide what tracing gives, so they decide what may be reused.
"""

from __future__ import annotations

import functools
import threading
from typing import Callable, Hashable, Sequence

from ..jax_internals import core, trace_context
from ..lru import LRU
from ..runtime.dispatch import FastDispatch
from ..stages import Lowered
from ..stats import STATS
from .arguments import BoundMethod

__all__ = ["MapFunction", "CallCache", "Traced", "CACHE_SIZE"]

#: Signatures (pytree, avals, statics, environment) each map object keeps
#: traced, lowered and compiled; the least recently used is dropped beyond it.
CACHE_SIZE = 64

#: Equal to no environment: the first call looks its dispatcher up.
_NO_ENV = object()


class CallCache:
    """Traced bodies, ``Lowered`` and ``Compiled`` programs by call key, each
    a bounded LRU, and the lock that makes lowering and compiling happen once."""

    def __init__(self, size: int = CACHE_SIZE):
        self.traced, self.lowered, self.compiled = LRU(size), LRU(size), LRU(size)
        self.lock = threading.RLock()

    def clear(self) -> None:
        for table in (self.traced, self.lowered, self.compiled):
            table.clear()


class Traced:
    """A traced body; ``cacheable`` is False when it closes over tracers of an
    enclosing transformation (valid for that call only)."""

    cacheable: bool = True


class MapFunction:
    """Shared machinery of the map front ends (see the module docs)."""

    #: How messages name this kind of callable ("pmap", "xmap", "pxla_mlir.jit").
    what: str = "map"

    def __init__(self, fun: Callable, *, static_argnums: Sequence[int] = (), donate_argnums: Sequence[int] = (),
                 cache: CallCache | None = None, identity: Hashable = None):
        self.fun = fun
        self.name = getattr(fun, "__name__", "fun")
        self.static_argnums = tuple(static_argnums)
        self.donate_argnums = tuple(donate_argnums)
        self._cache = cache if cache is not None else CallCache()
        self._identity = identity  # shared caches: tells this map's entries from other maps'
        self._dispatchers = LRU(16)  # environment -> FastDispatch
        self._last_dispatch: tuple = (_NO_ENV, None)  # the previous call's: most calls repeat it
        functools.update_wrapper(self, fun, updated=())  # never merge fun.__dict__ into ours

    # -- a front end's hooks ---------------------------------------------------------------
    def _examine(self, args: tuple, kwargs: dict):
        raise NotImplementedError

    def _environment(self) -> Hashable:
        return ()

    def _trace(self, call, env) -> Traced:
        raise NotImplementedError

    def _bind(self, traced: Traced, call):
        raise NotImplementedError

    def _lower_traced(self, traced: Traced, call, env) -> Lowered:
        raise NotImplementedError

    def _staged(self, call) -> bool:
        """Is this call bound as the primitive (under a transformation, on
        tracers) instead of run?"""
        return not core.trace_state_clean() or call.has_tracers

    # -- calling -----------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        env = self._environment()
        last_env, dispatch = self._last_dispatch
        if last_env is not env and last_env != env:
            dispatch = self._dispatchers.get(env)
            if dispatch is None:
                dispatch = self._dispatchers[env] = FastDispatch(
                    self.name, functools.partial(self._resolve, env), static_argnums=self.static_argnums,
                    donate_argnums=self.donate_argnums)
            self._last_dispatch = (env, dispatch)
        return dispatch(*args, **kwargs)

    def __get__(self, obj, objtype=None):
        """A map decorating a method binds like the function it wraps (``self``
        is then argument 0, so it can be static)."""
        return self if obj is None else BoundMethod(self, obj)

    def _resolve(self, env, args: tuple, kwargs: dict):
        """The Python path of a call (see :mod:`pxla_mlir.runtime.dispatch`):
        (output, the Compiled that ran or None, its flat arguments)."""
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
        return compiled.signature.unflatten(compiled.call_flat(call.flat_args)), compiled, call.flat_args

    def lower(self, *args, **kwargs) -> Lowered:
        call = self._examine(args, kwargs)
        env = self._environment()
        key = self._key(call, env)
        with self._cache.lock:
            return self._lowered(call, env, key, self._traced(call, env, key))

    # -- the caches ----------------------------------------------------------------------------
    def _key(self, call, env) -> tuple:
        return self._identity, call.key, env, trace_context()

    def _traced(self, call, env, key) -> Traced:
        traced = self._cache.traced.get(key)
        if traced is None:
            STATS["traces"] += 1
            traced = self._trace(call, env)
            if traced.cacheable:
                self._cache.traced[key] = traced
        return traced

    def _lowered(self, call, env, key, traced: Traced) -> Lowered:
        lowered = self._cache.lowered.get(key) if traced.cacheable else None
        if lowered is None:
            lowered = self._lower_traced(traced, call, env)
            if traced.cacheable:
                self._cache.lowered[key] = lowered
        return lowered

    def clear_cache(self) -> None:
        """Forgets every traced, lowered and compiled program of this map (and the C++ fast paths)."""
        self._cache.clear()
        self._dispatchers.clear()
        self._last_dispatch = (_NO_ENV, None)

