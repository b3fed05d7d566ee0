"""``pxla_mlir.jit``: a function containing pmaps as ONE replica-mode program.

As in 2022, code outside the pmaps runs replicated on every device, and each
pmap shards its inputs and unshards its outputs inside the same module, so

    step = pxla_mlir.jit(lambda params, x: update(params, pmap(grad_fn)(params, x)))

compiles once to a program over the product of the pmap axis sizes (the
largest over sibling pmaps). It is the pmap machinery with a top-level axis
of size 1: every argument and result is broadcast (replicated on all
devices). ``jax.jit`` around a pxla_mlir.pmap works too, but there the pmap
runs as ``jax.vmap`` on jit's devices (see :mod:`.rules`).
"""

from __future__ import annotations

import functools
from typing import Callable

from ..jax_internals import api_util, core
from ..pipelines import PmapPipeline, configure
from ..stages import STATS, Lowered, timed
from ..tracing import trace_flat
from .arguments import Call, examine_call
from .lower import lower_traced

_JIT_AXIS = "_pxla_jit"


class JitFunction:
    def __init__(self, fun: Callable, *, static_argnums=(), donate_argnums=(), devices=None, backend=None,
                 mode: str = PmapPipeline.mode, unshard: str = PmapPipeline.unshard,
                 shardings: str = PmapPipeline.sharding_dialect):
        self.fun = fun
        self.static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
        self.donate_argnums = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
        self.devices = tuple(devices) if devices is not None else None
        self.backend = backend
        self.options = configure(PmapPipeline, mode=mode, unshard=unshard, shardings=shardings)
        self.name = getattr(fun, "__name__", "fun")
        self._lowered: dict = {}
        functools.update_wrapper(self, fun, updated=())

    def _call(self, args, kwargs) -> Call:
        # Every argument is broadcast: in_axes None, and no axis size to infer.
        return examine_call(args, kwargs, in_axes=None, static_argnums=self.static_argnums, axis_size=1,
                            fn_name=self.name)

    def _key(self, call: Call):
        return (call.in_tree, call.global_avals, call.static_args)

    def lower(self, *args, **kwargs) -> Lowered:
        return self._lower(self._call(args, kwargs), len(args))

    def __call__(self, *args, **kwargs):
        call = self._call(args, kwargs)
        if any(isinstance(x, core.Tracer) for x in call.flat_args):
            raise TypeError(f"pxla_mlir.jit function {self.name!r} was called on traced values; apply jax "
                            f"transformations inside it (pxla_mlir.jit(jax.grad(f))), not around it")
        compiled = self._lower(call, len(args)).compile()
        return compiled(*args)

    def _lower(self, call: Call, nargs: int) -> Lowered:
        key = self._key(call)
        lowered = self._lowered.get(key)
        if lowered is not None:
            return lowered
        STATS["traces"] += 1
        flat_fun, store = call.flat_function(self.fun)
        debug = api_util.debug_info("pxla_mlir.jit", self.fun, tuple(range(len(call.flat_args))), {})
        with timed("trace"):
            jaxpr = trace_flat(flat_fun, call.global_avals, [], debug)
        lowered = lower_traced(jaxpr, axis_name=_JIT_AXIS, axis_size=1, in_axes=(None,) * len(call.flat_args),
                               out_axes=(None,) * len(jaxpr.out_avals), name=self.name,
                               global_avals=call.global_avals, donated=call.donated(self.donate_argnums, nargs),
                               devices=self.devices, backend=self.backend, options=self.options,
                               signature=call.signature(store["tree"]), kind="jit")
        self._lowered[key] = lowered
        return lowered


def jit(fun: Callable | None = None, *, static_argnums=(), donate_argnums=(), devices=None, backend=None,
        mode: str = PmapPipeline.mode, unshard: str = PmapPipeline.unshard,
        shardings: str = PmapPipeline.sharding_dialect):
    """Compiles ``fun`` (which may call pxla_mlir.pmap, at any depth) into one
    program over the devices its pmaps need; see the module docs."""
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums, donate_argnums=donate_argnums,
                                 devices=devices, backend=backend, mode=mode, unshard=unshard, shardings=shardings)
    return JitFunction(fun, static_argnums=static_argnums, donate_argnums=donate_argnums, devices=devices,
                       backend=backend, mode=mode, unshard=unshard, shardings=shardings)
