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

from ..dispatch import FastDispatch
from ..jax_internals import api_util, core
from ..pipelines import PmapPipeline, configure
from ..stages import STATS, Lowered, timed
from ..tracing import trace_flat
from .arguments import BoundMethod, Call, argnums, check_devices, check_donation, examine_call
from .lower import lower_traced

_JIT_AXIS = "_pxla_jit"


class JitFunction:
    def __init__(self, fun: Callable, *, static_argnums=(), donate_argnums=(), devices=None, backend=None,
                 mode: str = PmapPipeline.mode, unshard: str = PmapPipeline.unshard,
                 shardings: str = PmapPipeline.sharding_dialect):
        if not callable(fun):
            raise TypeError(f"pxla_mlir.jit requires a callable, got {fun!r} of type {type(fun).__name__}")
        self.fun = fun
        self.static_argnums = argnums(static_argnums, "pxla_mlir.jit static_argnums")
        self.donate_argnums = argnums(donate_argnums, "pxla_mlir.jit donate_argnums")
        check_donation(self.donate_argnums, self.static_argnums)
        self.devices = check_devices(devices)
        self.backend = backend
        self.options = configure(PmapPipeline, mode=mode, unshard=unshard, shardings=shardings)
        self.name = getattr(fun, "__name__", "fun")
        self._lowered: dict = {}
        self._dispatch = FastDispatch(self.name, self._resolve, static_argnums=self.static_argnums,
                                      donate_argnums=self.donate_argnums)
        functools.update_wrapper(self, fun, updated=())

    def __get__(self, obj, objtype=None):
        return self if obj is None else BoundMethod(self, obj)

    def _call(self, args, kwargs) -> Call:
        # Every argument is broadcast: in_axes None, and no axis size to infer.
        return examine_call(args, kwargs, in_axes=None, static_argnums=self.static_argnums, axis_size=1,
                            fn_name=self.name, kwargs_axis=None)

    def _key(self, call: Call):
        return (call.in_tree, call.global_avals, call.static_args)

    def lower(self, *args, **kwargs) -> Lowered:
        return self._lower(self._call(args, kwargs))

    def __call__(self, *args, **kwargs):
        return self._dispatch(*args, **kwargs)

    def _resolve(self, args, kwargs):
        """The Python path of a call (see :mod:`..dispatch`): output, Compiled, flat arguments."""
        call = self._call(args, kwargs)
        if any(isinstance(x, core.Tracer) for x in call.flat_args):
            raise TypeError(f"pxla_mlir.jit function {self.name!r} was called on traced values; apply jax "
                            f"transformations inside it (pxla_mlir.jit(jax.grad(f))), not around it")
        compiled = self._lower(call).compile()
        return compiled.signature.unflatten(compiled.call_flat(call.flat_args)), compiled, call.flat_args

    def _lower(self, call: Call) -> Lowered:
        key = self._key(call)
        lowered = self._lowered.get(key)
        if lowered is not None:
            return lowered
        STATS["traces"] += 1
        flat_fun, store = call.flat_function(self.fun, self.name)
        debug = api_util.debug_info("pxla_mlir.jit", self.fun, tuple(range(len(call.flat_args))), {})
        with timed("trace"):
            jaxpr = trace_flat(flat_fun, call.global_avals, [], debug)
        if any(isinstance(c, core.Tracer) for c in jaxpr.consts):
            raise TypeError(f"pxla_mlir.jit function {self.name!r} closes over values traced by an outer "
                            f"transformation (grad, vmap, ...); pass them as arguments and apply the "
                            f"transformation inside it (pxla_mlir.jit(jax.grad(f)))")
        from ..xmaps.jit import lower_in_jit  # xmaps make the program one over their mesh

        lowered = lower_in_jit(jaxpr, name=self.name, global_avals=call.global_avals,
                               donated=call.donated(self.donate_argnums), devices=self.devices,
                               backend=self.backend, signature=call.signature(store["tree"]))
        lowered = lowered or lower_traced(jaxpr, axis_name=_JIT_AXIS, axis_size=1, in_axes=(None,) * len(call.flat_args),
                               out_axes=(None,) * len(jaxpr.out_avals), name=self.name,
                               global_avals=call.global_avals, donated=call.donated(self.donate_argnums),
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
