"""Every private jax name pxla_mlir uses (``jax._src.*``), in one place.

jax 0.10.2 removed replica-based lowering, so tracing with an axis
environment, lowering with jax's own per-primitive rules and talking to the
PJRT client all go through private APIs; a jax upgrade touches this file.
Other modules import the names below from here, never from ``jax._src``.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Sequence

import numpy as np
from jax._src import (
    api_util,
    checkify as _checkify,
    compilation_cache,
    compiler,
    config,
    core,
    dispatch,
    dtypes,
    effects,
    linear_util as lu,
    mesh as _jax_mesh,
    sharding_impls,
    source_info_util,
    tree_util as jax_tree_util,
    xla_bridge,
)
from jax._src.interpreters import ad, batching, mlir as jax_mlir, partial_eval as pe, pxla
from jax._src.lax import parallel as parallel_primitives
from jax._src.lib import _jax, hlo, xla_client as xc
from jax._src.mesh import AbstractMesh as JaxAbstractMesh
from jax._src.tree_util import equality_errors_pytreedef as pytree_equality_errors

# Source locations in jaxprs and error messages name the user's line, not ours
# (a nested map is bound from inside pxla_mlir).
source_info_util.register_exclusion(os.path.dirname(os.path.abspath(__file__)))

__all__ = [
    "ad", "api_util", "batching", "compiler", "config", "core", "dispatch", "dtypes", "effects", "jax_mlir", "lu",
    "parallel_primitives", "pe", "pxla", "sharding_impls", "source_info_util", "xc", "JaxAbstractMesh", "backend",
    "compile_and_load", "batched_device_put", "array_result_handler", "cpp_dispatch", "dispatch_flatten",
    "is_extended", "ArrayImpl", "persistent_cache_enabled", "enable_persistent_cache", "at_top_level",
    "distributed_client", "backends_are_initialized", "concrete_value", "is_differentiated", "xla_computation",
    "hlo_text", "hlo_cost_analysis", "pytree_equality_errors", "JaxRuntimeError", "float0", "set_runtime_tokens",
    "jax_mesh_context", "trace_context", "call_site", "ir_element_dtype", "jit_disabled", "jit_enabled",
    "cc_shard_arg", "cache_key", "cache_read", "cache_write", "cache_remove", "serialize_executable",
    "deserialize_executable", "persistent_cache_thresholds", "is_process_zero", "persistent_cache_used",
    "special_checks_active", "debug_nans_active", "find_special_values", "InternalFloatingPointError",
    "checkify_rules", "checkify_jaxpr", "has_checks", "register_jit_devices", "no_special_values_in_deoptimized",
    "gspmd_sharding", "staged_tracer", "primal_tracer", "staged_ancestors", "same_trace", "flatten_axes"]

JaxRuntimeError = _jax.JaxRuntimeError
#: jax's config state that decides what tracing gives (x64, precision, axis env, ...): part of every cache key.
trace_context = config.trace_context


def backend(platform: str | None = None):
    return xla_bridge.get_backend(platform)


def jax_mesh_context():
    """jax's current mesh (``with jax.sharding.Mesh(...)`` or ``jax.set_mesh``),
    or None when there is none or it is empty."""
    mesh = _jax_mesh.thread_resources.env.physical_mesh
    if mesh.empty:
        mesh = _jax_mesh.get_concrete_mesh()
    return None if mesh is None or mesh.empty else mesh


def xla_computation(module_text: str):
    """XLA's HLO (an ``XlaComputation``) of a final MHLO module."""
    return _jax.mlir.mlir_module_to_xla_computation(module_text, use_tuple_args=False)


def hlo_text(computation, *, debug_info: bool = False) -> str:
    options = hlo.HloPrintOptions.short_parsable()
    options.print_metadata = debug_info
    return computation.as_hlo_module().to_string(options)


def hlo_cost_analysis(platform: str, computation) -> dict:
    return _jax.hlo_module_cost_analysis(backend(platform), computation.as_hlo_module())


def compile_and_load(module_or_text, devices: Sequence, options: xc.CompileOptions, platform: str | None = None,
                     host_callbacks: Sequence = ()):
    kwargs = {"host_callbacks": list(host_callbacks)} if host_callbacks else {}
    return backend(platform).compile_and_load(module_or_text, xc.DeviceList(tuple(devices)), options, **kwargs)


def batched_device_put(aval, sharding, pieces, devices, *, force_copy: bool):
    """One jax.Array from per-device host pieces (jaxlib's batched C++ path).

    ``force_copy`` copies each piece so later writes to the caller's numpy
    arrays cannot reach device memory (on CPU the default aliases aligned
    host memory). jaxlib fails ("bad_function_call") if a forced copy is
    asked for a piece that feeds several devices: pass private copies and
    ``force_copy=False`` then.
    """
    return xc.batched_device_put(aval, sharding, pieces, list(devices), True, force_copy)


def array_result_handler(aval, sharding):
    return xc.array_result_handler(aval, sharding, committed=True, _skip_checks=True)


# -- C++ dispatch (the fast path jax.jit uses) -------------------------------------------

ArrayImpl = xc.ArrayImpl
#: jax's placement of one argument the C++ path did not get as a ready jax.Array: (x, sharding, layout).
cc_shard_arg = pxla.cc_shard_arg


def cpp_dispatch(name: str, fun: Callable, cache_miss: Callable, static_argnums: Sequence[int], *,
                 capacity: int, shard_arg: Callable = cc_shard_arg) -> Callable:
    """jaxlib's C++ ``PjitFunction``: calls with a signature it has seen run
    from the fast-path data ``cache_miss`` returned for it, without Python
    (``shard_arg`` places arguments that are not ready jax.Arrays); ``fun``
    runs under ``jax.disable_jit()``. It keeps at most ``capacity``
    signatures, least recently used first out, in a cache of its own: an
    entry holds its executable alive, so a cache shared by every map would
    keep programs that the map's own bounded caches have dropped."""
    return _jax.pjit(name, fun, cache_miss, list(static_argnums), [], "pxla_mlir", jax_tree_util.dispatch_registry,
                     shard_arg, _jax.PjitFunctionCache(capacity=capacity))


_trace_ref, _axis_env_ref = core.trace_state_strong_ref, core.axis_env_state
_eval_trace, _top_axis_env = core.eval_trace, core.top_axis_env


def at_top_level() -> bool:
    """``core.trace_state_clean()`` in one frame (a cached call asks it every time)."""
    return _trace_ref.value is _eval_trace and _axis_env_ref.value is _top_axis_env


def dispatch_flatten(tree) -> tuple[list, Any]:
    """``tree``'s leaves and treedef as jaxlib's C++ dispatch flattens it
    (jax's dispatch registry: PRNG key arrays are unpacked too)."""
    return jax_tree_util.dispatch_registry.flatten(tree)


def jit_disabled() -> bool:
    """Whether ``jax.disable_jit()`` is in effect."""
    return bool(config.disable_jit.value)


def jit_enabled():
    """A context in which ``jax.disable_jit()`` is not in effect (it is part of ``trace_context()``)."""
    return config.disable_jit(False)


def ir_element_dtype(element_type) -> np.dtype:
    """The numpy dtype of an MLIR element type (``f32``, ``i1``, ``ui8``, ``bf16``, ...)."""
    with element_type.context:
        for dtype, make in jax_mlir._dtype_to_ir_type.items():
            if make() == element_type:
                return np.dtype(dtype)
    raise TypeError(f"no numpy dtype for the MLIR element type {element_type}")


def is_extended(dtype) -> bool:
    """PRNG keys and other extended dtypes (their buffers are physical arrays)."""
    return dtypes.issubdtype(dtype, dtypes.extended)


# -- the persistent compilation cache -------------------------------------------------------

def persistent_cache_enabled() -> bool:
    """Is a persistent cache directory set (jax's or ours)?"""
    return bool(config.compilation_cache_dir.value)


def persistent_cache_used(platform: str | None = None) -> bool:
    """Do compiles go through the persistent cache: a directory is set and
    jax's own gate (``is_cache_used``: ``jax_enable_compilation_cache`` on, a
    platform that can serialize executables) says yes, as for jax.jit."""
    return persistent_cache_enabled() and compilation_cache.is_cache_used(backend(platform))


def enable_persistent_cache(path: str, min_compile_time_secs: float) -> None:
    """Points jax's persistent compilation cache at ``path``. jax decides once
    per process whether the cache is used: reset that decision."""
    config.update("jax_compilation_cache_dir", path)
    config.update("jax_persistent_cache_min_compile_time_secs", min_compile_time_secs)
    compilation_cache.reset_cache()


def cache_key(module, devices: Sequence, device_ids: np.ndarray, options: xc.CompileOptions,
              platform: str | None = None) -> str:
    """jax's persistent-cache key: a hash of the module (without locations),
    the compile options, the devices, the jaxlib version and XLA's flags."""
    grid = np.array(list(devices), dtype=object).reshape(device_ids.shape)
    return compilation_cache.get_cache_key(module, grid, options, backend(platform))


def cache_read(key: str, platform: str | None = None) -> bytes | None:
    """The bytes stored under ``key`` in jax's persistent cache (None: none, or the cache is off)."""
    cache = compilation_cache._get_cache(backend(platform))
    return None if cache is None else cache.get(key)


def cache_write(key: str, value: bytes, platform: str | None = None) -> None:
    """Stores ``value`` under ``key`` (jax's cache keeps an entry that exists: remove it first)."""
    cache = compilation_cache._get_cache(backend(platform))
    if cache is not None:
        cache.put(key, value)


def cache_remove(key: str, platform: str | None = None) -> None:
    """Removes the entry under ``key`` from a local cache directory (jax's cache has no delete)."""
    from jax._src import lru_cache

    cache = compilation_cache._get_cache(backend(platform))
    path = getattr(getattr(cache, "_base_cache", cache), "path", None)
    if path is not None:
        try:
            (path / f"{key}{lru_cache._CACHE_SUFFIX}").unlink()
        except (OSError, AttributeError):  # gone already, or not a local directory
            pass


def persistent_cache_thresholds() -> tuple[float, int]:
    """(seconds of compile time, bytes) below which jax writes no cache entry."""
    return (float(config.persistent_cache_min_compile_time_secs.value),
            int(config.persistent_cache_min_entry_size_bytes.value))


def is_process_zero() -> bool:
    """jax writes cache entries from the first process of a run only."""
    from jax._src import distributed

    return distributed.global_state.process_id == 0


def serialize_executable(executable) -> bytes:
    return executable.serialize()


def deserialize_executable(data: bytes, devices: Sequence, options: xc.CompileOptions, platform: str | None = None):
    return backend(platform).deserialize_executable(data, xc.DeviceList(tuple(devices)), options)


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


# -- jax.distributed ---------------------------------------------------------------------------

def backends_are_initialized() -> bool:
    """Whether jax has started its backends (after which jax.distributed cannot start)."""
    return xla_bridge.backends_are_initialized()


def cluster_launch():
    """(coordinator address, process count, this process's id, launcher name)
    as jax's cluster detection reads them from a launcher's environment
    (Open MPI's ``mpirun``, Slurm's ``srun``, ...), or None outside one."""
    from jax._src.clusters import ClusterEnv

    env = next((e for e in ClusterEnv._cluster_types if not e.opt_in_only_method and e.is_env_present()), None)
    if env is None:
        return None
    address = env.get_coordinator_address(timeout_secs=None,
                                          override_coordinator_port=os.environ.get("JAX_COORDINATOR_PORT"))
    return address, env.get_process_count(), env.get_process_id(), env.name


def distributed_client():
    """jax.distributed's client of the coordination service (key-value store), or None."""
    from jax._src import distributed

    return distributed.global_state.client


def concrete_value(x):
    """The concrete value a JVP, linearize or batching tracer was built from
    (looking through nested ones), or None for staged tracers (jit, partial eval)."""
    while isinstance(x, core.Tracer):
        if isinstance(x, (ad.JVPTracer, ad.LinearizeTracer)):
            x = x.primal
        elif isinstance(x, batching.BatchTracer):
            x = x.val
        else:
            return None
    return x


def primal_tracer(x):
    """What a JVP or linearize tracer differentiates (looking through nested
    ones): the same value, in the same shape."""
    while isinstance(x, (ad.JVPTracer, ad.LinearizeTracer)):
        x = x.primal
    return x


def staged_tracer(x):
    """The tracer of a staging trace (jit) that a JVP, linearize or batching
    tracer was built from (looking through nested ones), or None."""
    while isinstance(x, core.Tracer) and not isinstance(x, pe.DynamicJaxprTracer):
        if isinstance(x, (ad.JVPTracer, ad.LinearizeTracer)):
            x = x.primal
        elif isinstance(x, batching.BatchTracer):
            x = x.val
        else:
            return None
    return x if isinstance(x, pe.DynamicJaxprTracer) else None


def same_trace(x, y) -> bool:
    """Whether tracers ``x`` and ``y`` belong to one trace."""
    return x._trace is y._trace


def staged_ancestors(x):
    """Every staged tracer that the staged tracer ``x`` was computed from, ``x`` included."""
    seen, todo = set(), [x]
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        yield t
        parent = getattr(t, "parent", None)
        todo.extend(i for i in getattr(parent, "in_tracers", ()) if isinstance(i, pe.DynamicJaxprTracer))


def is_differentiated(x) -> bool:
    """Whether a tracer is being differentiated in reverse mode (its value
    needs a cotangent of its own shape)."""
    while isinstance(x, core.Tracer):
        if isinstance(x, ad.LinearizeTracer):
            return True
        x = x.primal if isinstance(x, ad.JVPTracer) else x.val if isinstance(x, batching.BatchTracer) else None
    return False


float0 = dtypes.float0


def gspmd_sharding(devices: Sequence, op_sharding) -> "sharding_impls.GSPMDSharding":
    """jax's sharding of an executable's parameter or result as XLA reports
    it (an ``OpSharding`` over the executable's devices, in their order), as
    jax's own ``Compiled`` builds it."""
    return sharding_impls.GSPMDSharding(tuple(devices), op_sharding)


# -- the devices of maps inside jax.jit ----------------------------------------------------------

#: primitive -> fn(eqn) -> the shardings (devices) that equation's program needs inside jax.jit.
_JIT_DEVICES: dict = {}
_jax_intermediate_shardings = dispatch.get_intermediate_shardings


def register_jit_devices(primitive, shardings: Callable) -> None:
    """Tells jax.jit which devices an equation of ``primitive`` runs on:
    ``shardings(eqn)`` gives shardings over them. jax.jit picks its device
    assignment from the shardings of arguments, outputs and equations (a
    shard_map's mesh); a map's devices join them, so ``jax.jit`` of a map is a
    program over the map's devices, and a committed argument on other devices
    is jax's "incompatible devices" error."""
    _JIT_DEVICES[primitive] = shardings


def _intermediate_shardings(jaxpr):
    ours = [eqn for eqn in jaxpr.eqns if eqn.primitive in _JIT_DEVICES]
    if not ours:
        return _jax_intermediate_shardings(jaxpr)
    found = [(s, dispatch.SourceInfo(eqn.source_info, eqn.primitive.name))
             for eqn in ours for s in _JIT_DEVICES[eqn.primitive](eqn)]
    # jax's walk (it recurses through this function) never enters a map's body: nested maps are the map's.
    rest = jaxpr.replace(eqns=[eqn for eqn in jaxpr.eqns if eqn.primitive not in _JIT_DEVICES])
    return found + list(_jax_intermediate_shardings(rest))


dispatch.get_intermediate_shardings = _intermediate_shardings


# -- checkify -----------------------------------------------------------------------------------

#: checkify's rule per primitive: rule(error, enabled_errors, *operands, **params) -> (error, outputs).
checkify_rules = _checkify.error_checks


def checkify_jaxpr(jaxpr: core.ClosedJaxpr, enabled_errors, err_tree, *avals):
    """``jaxpr`` with its checks functionalized: (checked jaxpr taking the error
    leaves then ``jaxpr``'s operands, the pytree of (error, outputs))."""
    checked, out_tree, _ = _checkify.jaxpr_to_checkify_jaxpr(jaxpr, enabled_errors, err_tree, *avals)
    return checked, out_tree


def has_checks(jaxpr) -> bool:
    """Does ``jaxpr`` hold ``checkify.check``s (effects only checkify can discharge)?"""
    return any(isinstance(e, _checkify.ErrorEffect) for e in jaxpr.effects)


# -- jax_debug_nans / jax_debug_infs --------------------------------------------------------------

#: Is jax_debug_nans or jax_debug_infs on?
special_checks_active = dispatch.needs_check_special
#: What a jax.jit inside a body raises for a nan in its output when its caller reports it.
InternalFloatingPointError = api_util.InternalFloatingPointError


def debug_nans_active() -> bool:
    return bool(config.debug_nans.value)


def find_special_values(name: str, arrays: Sequence) -> str | None:
    """"nan" or "inf" if one of this process's pieces of ``arrays`` holds one that
    jax_debug_nans / jax_debug_infs asks to report (jax's own check), else None."""
    buffers = [s.data for x in arrays for s in getattr(x, "addressable_shards", ())]
    try:
        dispatch.check_special(name, buffers)
    except api_util.InternalFloatingPointError as e:
        return e.ty
    return None


def no_special_values_in_deoptimized(what: str, kind: str) -> None:
    """jax's FloatingPointError for a program whose de-optimized run found no nan/inf."""
    api_util._raise_no_nan_in_deoptimized(f"Invalid value ({kind}) encountered in {what}")


def set_runtime_tokens(devices, token) -> None:
    """Registers a launch's completion token per device, so that
    ``jax.effects_barrier()`` and jax's exit hook wait for its host callbacks."""
    for i, device in enumerate(devices):
        dispatch.runtime_tokens.set_output_runtime_token(device, token.get_token(i))


def call_site(source_info=None) -> str:
    """Where the user's code is, as jax summarizes a location: ``source_info``'s
    user frame, else the innermost user frame of the Python stack (jax's
    tracebacks end at the function being traced, so an equation a map's body
    binds directly, such as an xmap passed as another's function, has none)."""
    if source_info is not None:
        at = source_info_util.summarize(source_info)
        if at:
            return at
    frame = sys._getframe(1)
    while frame is not None and not source_info_util.is_user_filename(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return ""
    return source_info_util._summarize_frame(source_info_util.raw_frame_to_frame(frame.f_code, frame.f_lasti))
