"""``pxla_mlir.jit``: a function containing maps as ONE program.

As in 2022, code outside the maps runs replicated on every device, and each
map shards its inputs and unshards its outputs inside the same module, so

    step = pxla_mlir.jit(lambda params, x: update(params, pmap(grad_fn)(params, x)))

compiles once to a program over the devices its maps need. The kind of the
maps in the body lowers it (:meth:`pxla_mlir.maps.kind.MapKind.lower_jit`):
pmaps make a replica-mode program over the product of their axis sizes (the
body is a pmap of size 1, every argument and result broadcast), xmaps one
over their mesh; a body without maps is lowered by the registry's first
kind. ``jax.jit`` around a map works too, with jax's own pipeline (see
each kind's ``under_jit``). In a multi-process run a host argument that a
map inside takes directly is this process's share of what that map splits
across processes (:mod:`pxla_mlir.distributed.jit_shares`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, overload

import jax
from jax import tree_util
from jax.stages import ArgInfo

from pxla_mlir.distributed import jit_shares
from pxla_mlir.distributed.processes import is_multi_process
from pxla_mlir.errors import PxlaUserError
from pxla_mlir.jaxbridge.jax_internals import api_util, core, jax_mesh_context, trace_context
from pxla_mlir.jaxbridge.tracebacks import api_boundary
from pxla_mlir.maps import registry
from pxla_mlir.maps.arguments import Call, argnums, check_backend, check_donation, examine_broadcast, keystr
from pxla_mlir.maps.function import MapFunction, Traced
from pxla_mlir.maps.kind import JitBody
from pxla_mlir.maps.tracing import trace_flat
from pxla_mlir.mlir.pass_infra.extra_passes import EXTRA_FIELDS
from pxla_mlir.mlir.pass_infra.registry import REGISTRY
from pxla_mlir.mlir.pipelines import PmapPipeline, configure
from pxla_mlir.mlir.sharding.mesh import current_mesh
from pxla_mlir.mlir.support.lru import LRU
from pxla_mlir.mlir.support.stats import timed
from pxla_mlir.stages.aot import Lowered
from pxla_mlir.stages.devices import check_devices

if TYPE_CHECKING:
    from jax.extend.core import ClosedJaxpr

__all__ = ["jit", "JitFunction", "JitError"]


class JitError(PxlaUserError, ValueError):
    """A pxla_mlir.jit function whose maps cannot make one program."""


@dataclasses.dataclass(frozen=True)
class _Traced(Traced):
    jaxpr: ClosedJaxpr
    out_tree: object


class JitFunction(MapFunction[_Traced]):
    what = "pxla_mlir.jit"

    def __init__(self, fun: Callable, *, static_argnums=(), donate_argnums=(), devices=None, backend=None,
                 options: dict):
        if not callable(fun):
            raise TypeError(f"pxla_mlir.jit requires a callable, got {fun!r} of type {type(fun).__name__}")
        static = argnums(static_argnums, "pxla_mlir.jit static_argnums")
        donate = argnums(donate_argnums, "pxla_mlir.jit donate_argnums")
        check_donation(donate, static)
        self.devices = check_devices(devices, "pxla_mlir.jit")
        check_backend(self.devices, backend, "pxla_mlir.jit")
        self.backend = backend
        self.options = options  # pipeline options by api name, for the kind that lowers the body
        shared = (static, donate, self.devices, backend, tuple(sorted(options.items())))
        super().__init__(fun, static_argnums=static, donate_argnums=donate, options=shared)
        self._shares = LRU(64)  # multi-process: the arguments that are shares, by call (distributed/jit_shares.py)

    def _environment(self) -> tuple:
        scope = tuple(kind.environment() for kind in registry.kinds())  # xmaps: the mesh and loops in scope
        if not (self.options.get("pxla_passes") or self.options.get("mhlo_passes")):
            return scope
        return (*scope, REGISTRY.generation)  # a pass registered again (another version) lowers anew

    def _examine(self, args, kwargs) -> Call:
        call = examine_broadcast(args, kwargs, static_argnums=self.static_argnums, fn_name=self.name)
        if is_multi_process() and not call.has_tracers:  # host arguments may be this process's shares
            key = (call.key, trace_context(), current_mesh(), jax_mesh_context())
            call = jit_shares.global_call(call, self._shares, key, functools.partial(self._probe, call), self.name,
                                          functools.partial(_arg_name, call))
        return call

    def _probe(self, call: Call, wrap, avals):
        flat_fun, _ = call.flat_function(self.fun, self.name)
        debug = api_util.debug_info("pxla_mlir.jit", self.fun, tuple(range(len(call.flat_args))), {})
        trace_flat(wrap(flat_fun), avals, [], debug, binder="jit")

    def _call_without_jit(self, env, args: tuple, kwargs: dict):
        return self.fun(*args, **kwargs)  # under jax.disable_jit(), as jax.jit

    def _staged(self, call: Call) -> bool:
        if call.has_tracers:
            raise TypeError(f"pxla_mlir.jit function {self.name!r} was called on traced values; apply jax "
                            f"transformations inside it (pxla_mlir.jit(jax.grad(f))), not around it")
        return False

    def _trace(self, call: Call, env) -> _Traced:
        flat_fun, store = call.flat_function(self.fun, self.name)
        debug = api_util.debug_info("pxla_mlir.jit", self.fun, tuple(range(len(call.flat_args))), {})
        with timed("trace"):
            jaxpr = trace_flat(flat_fun, call.global_avals, [], debug, binder="jit")
        if any(isinstance(c, core.Tracer) for c in jaxpr.consts):
            raise TypeError(f"pxla_mlir.jit function {self.name!r} closes over values traced by an outer "
                            f"transformation (grad, vmap, ...); pass them as arguments and apply the "
                            f"transformation inside it (pxla_mlir.jit(jax.grad(f)))")
        return _Traced(jaxpr, store["tree"])

    @api_boundary
    def trace(self, *args, **kwargs) -> JitTraced:
        """The traced program for these arguments (jax's ``jit(f).trace``):
        its ``jaxpr``, ``args_info``, ``out_info``, ``out_tree``, ``lower()``
        and the rest of ``jax.stages.Traced``."""
        call = self._examine(args, kwargs)
        env = self._environment()
        key = self._key(call, env)
        with self._cache.lock:
            traced = self._traced(call, env, key)
        return JitTraced(self, args, kwargs, call, traced, env)

    @api_boundary
    def eval_shape(self, *args, **kwargs):
        """The outputs' pytree of ``jax.ShapeDtypeStruct``, traced, never run
        (jax's ``jit(f).eval_shape``)."""
        return self.trace(*args, **kwargs).out_info

    def _lower_traced(self, traced: _Traced, call: Call, env) -> Lowered:
        found: dict = {}
        for eqn in _map_eqns(traced.jaxpr):
            found.setdefault(registry.kind_of_eqn(eqn), []).append(eqn)
        if len(found) > 1:
            a, b = sorted(k.name for k in found)[:2]
            raise JitError(f"pxla_mlir.jit function {self.name!r} holds both {a}s and {b}s, which cannot share one "
                           f"program (a pmap lays its devices out by its axis, an xmap by its mesh: each kind its "
                           f"own way); jit them separately")
        kind, eqns = next(iter(found.items())) if found else (registry.kinds()[0], [])
        return kind.lower_jit(traced.jaxpr, eqns, JitBody(
            self.name, call.global_avals, call.donated(self.donate_argnums), call.signature(traced.out_tree),
            self.devices, self.backend, self.options))


    def _deoptimized(self, traced: _Traced, call: Call, env):
        body, _ = call.flat_function(self.fun, self.name)  # un-jitted: each map inside checks its own outputs
        return body(*call.flat_args)


class JitTraced(jax.stages.Traced):
    """A ``pxla_mlir.jit`` function traced for some arguments (a
    ``jax.stages.Traced``): the jaxpr it lowers, with the maps in it as
    primitives."""

    def __init__(self, jitted: JitFunction, args: tuple, kwargs: dict, call: Call, traced: _Traced, env,
                 retraced: bool = False):
        self._jitted, self._args, self._kwargs = jitted, args, kwargs
        self._call, self._body, self._env = call, traced, env
        self._retraced = retraced  # its jaxpr is not the one the function's caches hold (physicalize)

    jaxpr = property(lambda self: self._body.jaxpr)
    fun_name = property(lambda self: self._jitted.name)
    out_tree = property(lambda self: self._body.out_tree)

    @property
    def out_avals(self):
        return tree_util.tree_unflatten(self._body.out_tree, self._body.jaxpr.out_avals)

    @property
    def lojax(self) -> JitTraced:  # pyright: ignore[reportIncompatibleMethodOverride] (what jax reads of a LoJax)
        """jax's view of a trace with its high-level types lowered; a
        pxla_mlir.jit trace has none, so it is this trace."""
        return self

    @property
    def effects(self) -> frozenset:
        """The jaxpr's effects (an input's effect by its position), as jax's."""
        return frozenset(core.positional_effects(self.jaxpr))

    def closure_convert(self) -> tuple[list, Callable]:
        """``(consts, fun)``: the values the trace captured, and a function
        with ``fun(consts, *args, **kwargs)`` computing what the traced one
        computes on ``args`` (jax's ``Traced.closure_convert``; the static
        arguments stay as traced)."""
        consts, closed, in_tree, out_tree = list(self.jaxpr.consts), self.jaxpr.jaxpr, self._call.in_tree, self.out_tree

        def converted(env, *args, **kwargs):
            leaves, tree = tree_util.tree_flatten((args, kwargs))
            if tree != in_tree:
                raise TypeError(f"{self.fun_name!r} (closure-converted) was traced for arguments {in_tree}, "
                                f"called with {tree}: pass arguments of the traced structure")
            return tree_util.tree_unflatten(out_tree, core.eval_jaxpr(closed, list(env), *leaves))

        converted.__name__ = converted.__qualname__ = self.fun_name
        return consts, converted

    def with_consts_as_arg(self) -> tuple[list, JitTraced]:
        """``(consts, traced)``: the captured values and this trace taking
        them as one leading argument (jax's ``Traced.with_consts_as_arg``)."""
        consts, fun = self.closure_convert()
        jitted = JitFunction(fun, devices=self._jitted.devices, backend=self._jitted.backend,
                             options=self._jitted.options)
        args, kwargs = self._call.in_tree.unflatten(self._call.flat_args)
        return consts, jitted.trace(consts, *args, **kwargs)

    def physicalize(self, ctx) -> JitTraced:
        """This trace with its jaxpr physicalized by jax's ``ctx`` (jax's ``Traced.physicalize``)."""
        body = dataclasses.replace(self._body, jaxpr=ctx.physicalize_closed_jaxpr(self.jaxpr))
        return JitTraced(self._jitted, self._args, self._kwargs, self._call, body, self._env, retraced=True)

    @property
    def args_info(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        """The (args, kwargs) pytree of ``jax.stages.ArgInfo``."""
        donated = self._call.donated(self._jitted.donate_argnums)
        return self._call.in_tree.unflatten([ArgInfo(av, d) for av, d in zip(self._call.global_avals, donated)])

    @property
    def out_info(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        """The outputs' pytree of ``jax.ShapeDtypeStruct``."""
        return tree_util.tree_unflatten(self._body.out_tree, [
            jax.ShapeDtypeStruct(av.shape, av.dtype) for av in self._body.jaxpr.out_avals])

    @api_boundary
    def lower(self, *, lowering_platforms=None, _private_parameters=None) -> Lowered:  # pyright: ignore
        """Its ``Lowered`` (from the same cache as ``pxla_mlir.jit(f).lower``)."""
        if lowering_platforms is not None:
            raise NotImplementedError("pxla_mlir.jit lowers for its devices' platform only: leave "
                                      "lowering_platforms out")
        if self._retraced:
            return self._jitted._lower_traced(self._body, self._call, self._env)
        return self._jitted.lower(*self._args, **self._kwargs)

    @api_boundary
    def __call__(self, *args, **kwargs):
        return self._jitted(*args, **kwargs)


def _arg_name(call: Call, i: int) -> str:
    """``args[1]['w']``: flat argument ``i`` of a call, for messages (dynamic arguments only)."""
    tree = tree_util.tree_unflatten(call.in_tree, range(len(call.flat_args)))
    return keystr(tree_util.tree_flatten_with_path(tree)[0][i][0])


def _map_eqns(jaxpr, found: list | None = None) -> list:
    """Every map equation of ``jaxpr``, at any depth."""
    found = [] if found is None else found
    jaxpr = jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr
    for eqn in jaxpr.eqns:
        if registry.kind_of_eqn(eqn) is not None:
            found.append(eqn)
        for sub in core.jaxprs_in_params(eqn.params):
            _map_eqns(sub, found)
    return found


@overload
def jit(fun: Callable, *, static_argnums: int | Sequence[int] = (), donate_argnums: int | Sequence[int] = (),
        devices: Sequence | None = None, backend: str | None = None, mode: str = "replica",
        unshard: str = "all-gather", shardings: str = "sdy",
        extra_passes: str | Mapping[str, str] | None = None) -> JitFunction: ...
@overload
def jit(fun: None = None, *, static_argnums: int | Sequence[int] = (), donate_argnums: int | Sequence[int] = (),
        devices: Sequence | None = None, backend: str | None = None, mode: str = "replica",
        unshard: str = "all-gather",
        shardings: str = "sdy",
        extra_passes: str | Mapping[str, str] | None = None) -> Callable[[Callable], JitFunction]: ...
@api_boundary
def jit(fun: Callable | None = None, *, static_argnums: int | Sequence[int] = (), donate_argnums: int | Sequence[int] = (),
        devices: Sequence | None = None, backend: str | None = None, mode: str = "replica",
        unshard: str = "all-gather",
        shardings: str = "sdy",
        extra_passes: str | Mapping[str, str] | None = None) -> JitFunction | Callable[[Callable], JitFunction]:
    """Compiles ``fun`` (which may call pxla_mlir maps, at any depth) into one
    program over the devices its maps need (the [user
    guide](guide.md#transformations-and-pxla_mlirjit) shows one). ``mode``,
    ``unshard`` and ``shardings`` are pmap's options for the program of a
    body holding pmaps. ``extra_passes`` runs passes of your own in the
    program's pipeline, as pmap's does (the maps inside lower in that one
    program: their own ``extra_passes`` do not run)."""
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums, donate_argnums=donate_argnums,
                                 devices=devices, backend=backend, mode=mode, unshard=unshard, shardings=shardings,
                                 extra_passes=extra_passes)
    # checked now, as pmap's; the own passes kept as the pipeline's fields (canonical text and versions)
    checked = configure(PmapPipeline, mode=mode, unshard=unshard, shardings=shardings, extra_passes=extra_passes)
    own = {k: getattr(checked, k) for k in EXTRA_FIELDS} if checked.pxla_passes or checked.mhlo_passes else {}
    return JitFunction(fun, static_argnums=static_argnums, donate_argnums=donate_argnums, devices=devices,
                       backend=backend, options=dict(mode=mode, unshard=unshard, shardings=shardings, **own))
