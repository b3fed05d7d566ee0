"""Every private jax name pxla_mlir uses (``jax._src.*``), in one place.

jax 0.10 removed replica-based lowering, so tracing with an axis
environment, lowering with jax's own per-primitive rules and talking to the
PJRT client all go through private APIs. Other modules import the names
below from here, never from ``jax._src``, so a jax release is a diff of
this file:

* each private module pxla_mlir reads is a :class:`PrivateNames` listing
  the names it uses, one by one (``core.Jaxpr``, ``pe.dce_jaxpr``, ...);
  every listed name was checked on the releases in :data:`CHECKED_ON`.
  A name the installed jax lacks fails where it is used, naming itself
  (``tests/jaxbridge/test_jax_versions.py`` lists any on the installed jax);
* names and protocols that differ between releases are bridged below
  their tables by small adapters, each saying which releases take which
  branch (``register_linearization``, ``lower_jaxpr_to_module``, ...).

Only names and the thinnest adapters over a private API's shape live here;
our logic that uses them lives with its users (:mod:`.stablehlo_lowering`,
:mod:`pxla_mlir.runtime.results`, :mod:`pxla_mlir.maps.jit_devices`, ...).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.extend.core as jex_core
import numpy as np
from jax._src import (
    api_util as _api_util,
    checkify as _checkify,
    compilation_cache,
    compiler as _compiler,
    config as _config,
    core as _core,
    dispatch as _dispatch,
    dtypes as _dtypes,
    effects as _effects,
    linear_util as _lu,
    mesh as _jax_mesh,
    sharding_impls as _sharding_impls,
    source_info_util as _source_info_util,
    tree_util as jax_tree_util,
    util as _util,
    xla_bridge,
)
from jax._src.interpreters import (
    ad as _ad,
    batching as _batching,
    mlir as _jax_mlir,
    partial_eval as _pe,
    pxla as _pxla,
)
from jax._src.lax import parallel as _parallel
from jax._src.lib import _jax, hlo, ifrt_version, jaxlib_extension_version, xla_client as _xc
from jax._src.mesh import AbstractMesh as JaxAbstractMesh
from jax._src.tree_util import equality_errors_pytreedef as pytree_equality_errors

#: The jax releases every name below was checked on. CI runs the whole suite on each (make test on the first,
#: the newest Python 3.11 allows; nox's ci sessions on the others) and a smoke subset on the last under
#: Python 3.13: see .ci/run and noxfile.py.
CHECKED_ON = ("0.10.2", "0.11.2", "0.12.0.1")
#: The jax release installed, as (major, minor, patch): for protocols that changed without a name to probe.
JAX_VERSION = tuple(int(part) for part in jax.__version__.split(".")[:3])
JAX_VERSION_TEXT: str = jax.__version__


class PrivateNames:
    """The names pxla_mlir uses from one private jax module, listed one by one.

    ``bridged`` names stand in for the module's own where releases differ.
    Reading a name that is not listed, or that the installed jax lacks,
    raises an AttributeError that says which and where to add or bridge it.
    """

    def __init__(self, module, names: str, **bridged):
        self._module = module
        self._listed = frozenset(names.split()) | frozenset(bridged)
        self._missing = [name for name in names.split() if not hasattr(module, name)]
        for name in names.split():
            if hasattr(module, name):
                setattr(self, name, getattr(module, name))
        for name, value in bridged.items():
            setattr(self, name, value)

    def __getattr__(self, name: str) -> Any:  # only for names not set above
        if name.startswith("__"):
            raise AttributeError(name)
        module = self.__dict__["_module"].__name__
        if name in self.__dict__["_missing"]:
            raise AttributeError(f"jax {jax.__version__} has no {module}.{name} (pxla_mlir was checked on jax "
                                 f"{', '.join(CHECKED_ON)}): bridge it in pxla_mlir/jaxbridge/jax_internals.py")
        raise AttributeError(f"{module}.{name} is not among the private names pxla_mlir uses: list it in "
                             f"pxla_mlir/jaxbridge/jax_internals.py")

    def listed(self) -> frozenset[str]:
        """Every name this table gives, the bridged ones included."""
        return self._listed

    def missing(self) -> list[str]:
        """The listed names the installed jax lacks (each fails where it is used)."""
        return [f"{self._module.__name__}.{name}" for name in self._missing]

    def patch(self, name: str, value):
        """Replaces jax's own ``name`` with ``value`` (jax's callers see it too); returns the original."""
        original = getattr(self._module, name)
        setattr(self._module, name, value)
        setattr(self, name, value)
        return original


core = PrivateNames(
    _core,
    "Jaxpr JaxprTypeError Literal Primitive ShapedArray Tracer Var axis_env_state check_jaxpr custom_typechecks "
    "eval_jaxpr eval_trace extend_axis_env_nd filter_named_axis_effects gensym get_axis_env jaxprs_in_params "
    "mapped_aval physical_aval positional_effects shaped_abstractify top_axis_env trace_state_clean "
    "trace_state_strong_ref typecompat unmapped_aval valid_jaxtype",
    # jax 0.11 merged ClosedJaxpr into Jaxpr (a Jaxpr carries its consts; ClosedJaxpr(jaxpr, consts) still
    # builds one, and .jaxpr gives the Jaxpr itself); jax.extend.core names the class on every release.
    ClosedJaxpr=jex_core.ClosedJaxpr)
pe = PrivateNames(
    _pe,
    "DynamicJaxprTracer JaxprTracer PartialVal convert_constvars_jaxpr custom_partial_eval_rules dce_jaxpr dce_rules "
    "has_effects lower_jaxpr2 merge_lists move_binders_to_front new_eqn_recipe new_jaxpr_eqn partial_eval_jaxpr_custom "
    "partial_eval_jaxpr_custom_rules partial_eval_jaxpr_nounits partition_list trace_to_jaxpr_dynamic")
ad = PrivateNames(
    _ad,
    "JVPTracer LinearizeTracer UndefinedPrimal Zero backward_pass instantiate_zeros is_undefined_primal jvp_jaxpr "
    "primitive_jvps primitive_transposes")
batching = PrivateNames(_batching, "BatchTracer batch_jaxpr_axes fancy_primitive_batchers zero_if_mapped")
api_util = PrivateNames(_api_util, "InternalFloatingPointError PytreeLeaf debug_info flatten_axes")
jax_mlir = PrivateNames(
    _jax_mlir,
    "LoweringParameters aval_to_ir_type custom_call dump_module_to_file jaxpr_subcomp lower_fun make_ir_context "
    "refine_polymorphic_shapes register_lowering")
xc = PrivateNames(_xc, "ArrayImpl CompileOptions DeviceList HloSharding XlaComputation")
pxla = PrivateNames(
    _pxla, "MeshExecutableFastpathData cc_shard_arg global_aval_to_result_handler logger reflatten_outputs_for_dispatch")
source_info_util = PrivateNames(_source_info_util, "current is_user_filename summarize")
sharding_impls = PrivateNames(
    _sharding_impls, "GSPMDSharding NamedSharding PartitionSpec SPMDAxisContext ShardingContext physical_sharding")
dispatch = PrivateNames(
    _dispatch,
    "BACKEND_COMPILE_EVENT SourceInfo check_special get_intermediate_shardings log_elapsed_time runtime_tokens")
config = PrivateNames(
    _config,
    "compilation_cache_dir debug_infs debug_nans disable_jit log_compiles persistent_cache_min_compile_time_secs "
    "persistent_cache_min_entry_size_bytes trace_context update use_shardy_partitioner")
effects = PrivateNames(_effects, "lowerable_effects ordered_effects")
dtypes = PrivateNames(_dtypes, "extended float0 issubdtype")
lu = PrivateNames(_lu, "wrap_init")
compiler = PrivateNames(_compiler, "get_compile_options logger")
parallel_primitives = PrivateNames(_parallel, "psum_p")
#: ``test_event``: the events jax's test utilities count (``jtu.count_compilation_after_persistent_cache_miss``).
util = PrivateNames(_util, "test_event")

#: Every table above, for tests/jaxbridge/test_jax_versions.py.
TABLES = (core, pe, ad, batching, api_util, jax_mlir, xc, pxla, source_info_util, sharding_impls, dispatch, config,
          effects, dtypes, lu, compiler, parallel_primitives, util)


def missing_names() -> list[str]:
    """The private names pxla_mlir lists that the installed jax lacks."""
    return [name for table in TABLES for name in table.missing()]


# Source locations in jaxprs and error messages name the user's line, not ours
# (a nested map is bound from inside pxla_mlir): the whole package, not only this folder.
_source_info_util.register_exclusion(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

__all__ = [
    # jax._src modules, as the names pxla_mlir uses from them
    "ad", "api_util", "batching", "compiler", "config", "core", "dispatch", "dtypes", "effects", "jax_mlir", "lu",
    "parallel_primitives", "pe", "pxla", "sharding_impls", "source_info_util", "util", "xc", "JaxAbstractMesh", "ArrayImpl",
    "InternalFloatingPointError", "JaxRuntimeError", "cc_shard_arg", "register_checkify", "float0",
    "pytree_equality_errors", "special_checks_active", "trace_context", "CHECKED_ON", "JAX_VERSION",
    "JAX_VERSION_TEXT", "PrivateNames",
    "missing_names",
    # thin adapters over private API shapes, and bridges between releases
    "backend", "jax_mesh_context", "xla_computation", "hlo_text", "hlo_cost_analysis", "compile_and_load",
    "device_client", "batched_device_put", "array_result_handler", "assemble_array", "replica_results_need_assembly",
    "cpp_dispatch", "at_top_level", "dispatch_flatten", "jit_disabled", "trace_ref", "eval_trace", "axis_env_ref",
    "top_axis_env", "jit_enabled", "ir_element_dtype", "is_extended", "lowering_flags", "lower_jaxpr_to_module",
    "register_linearization", "register_dce", "linearize_jaxpr", "scan_counts", "lojax", "high_level_avals",
    "persistent_cache_enabled", "persistent_cache_used", "cache_gate_open",
    "enable_persistent_cache", "cache_key", "cache_read", "cache_write", "cache_remove", "persistent_cache_thresholds",
    "is_process_zero", "serialize_executable", "deserialize_executable", "backends_are_initialized", "cluster_launch",
    "distributed_client", "same_trace", "gspmd_sharding", "checkify_jaxpr", "has_checks", "debug_nans_active",
    "no_special_values_in_deoptimized", "debug_nans_flag", "debug_infs_flag", "set_runtime_tokens", "summarize_frame"]

JaxRuntimeError = _jax.JaxRuntimeError
#: jax's config state that decides what tracing gives (x64, precision, axis env, ...): part of every cache key.
trace_context = _config.trace_context


def backend(platform: str | None = None):
    return xla_bridge.get_backend(platform)


def jax_mesh_context():
    """jax's current mesh (``with jax.sharding.Mesh(...)`` or ``jax.set_mesh``),
    or None when there is none or it is empty."""
    mesh = _jax_mesh.thread_resources.env.physical_mesh
    if mesh.empty:
        mesh = _jax_mesh.get_concrete_mesh()
    return None if mesh is None or mesh.empty else mesh


#: jax 0.11+ asks for the output types too.
_LOWER_TAKES_OUT_AVALS = "out_avals" in inspect.signature(_jax_mlir.lower_jaxpr_to_module).parameters


@contextlib.contextmanager
def lowering_flags(shardy: bool):
    """jax's flags as our lowerings need them: Shardy on or off, and
    collectives with explicit device groups (under Shardy, jax 0.11+ writes
    groups as mesh axes, ``#stablehlo.replica_group_mesh_axes``, which the
    pxla passes do not read)."""
    with _config.use_shardy_partitioner(shardy):
        if not hasattr(_config, "use_rgv3"):  # jax 0.10
            yield
            return
        with _config.use_rgv3(False):
            yield


def lower_jaxpr_to_module(name: str, closed_jaxpr, **kwargs):
    """jax's ``mlir.lower_jaxpr_to_module`` (0.11+ also takes ``out_avals``)."""
    if _LOWER_TAKES_OUT_AVALS:
        kwargs.setdefault("out_avals", closed_jaxpr.out_avals)
    return _jax_mlir.lower_jaxpr_to_module(name, closed_jaxpr, **kwargs)


def register_linearization(primitive, rule: Callable) -> None:
    """Registers ``rule(is_vjp, nonzeros, *primals, **params) -> (primal outputs,
    nonzero tangent outputs, residuals, tangent_fun(residuals, *tangents))``
    as ``primitive``'s linearization (jax 0.11+ also passes structured
    residuals, which our rules never make)."""
    if JAX_VERSION < (0, 11):
        _ad.primitive_linearizations[primitive] = rule
        return

    def with_structured_residuals(is_vjp, nonzeros, *primals, **params):
        out, nzs_out, residuals, tangent_fun = rule(is_vjp, nonzeros, *primals, **params)
        return out, nzs_out, residuals, None, lambda res, _structured, *tangents: tangent_fun(res, *tangents)

    _ad.primitive_linearizations[primitive] = with_structured_residuals


def register_dce(primitive, rule: Callable) -> None:
    """Registers ``rule(used_outputs, eqn) -> (used_inputs, new eqn or None)``
    as ``primitive``'s dead-code rule (jax 0.12 also passes which inputs are
    live, which matters only for references, which maps never take)."""
    if not _DCE_RULES_TAKE_LIVE_INPUTS:
        _pe.dce_rules[primitive] = rule
    else:
        _pe.dce_rules[primitive] = lambda used_outputs, _live_inputs, eqn: rule(used_outputs, eqn)


#: jax's own closed-call rule shows which protocol the release's dead-code rules follow.
_DCE_RULES_TAKE_LIVE_INPUTS = len(inspect.signature(_pe.dce_jaxpr_closed_call_rule).parameters) == 3


def scan_counts(params: dict) -> tuple[int, int]:
    """(constants, carried values) among a ``scan`` equation's operands
    (jax 0.11+ keeps them as a tree of the operands, ``ft_in``)."""
    if "num_consts" in params:  # jax 0.10
        return params["num_consts"], params["num_carry"]
    consts, carry, _ = params["ft_in"].unpack()
    return len(consts), len(carry)


def linearize_jaxpr(jaxpr, nonzeros, *, is_vjp: bool):
    """jax's ``_ad.linearize_jaxpr`` without forwarding: (forward jaxpr giving
    the primal outputs then the residuals, number of residuals, which tangent
    outputs are nonzero, tangent jaxpr taking the residuals then the nonzero
    tangents)."""
    fwd, res, nzs_out, _, tangent = _ad.linearize_jaxpr(jaxpr, nonzeros, is_vjp=is_vjp, allow_fwds=False)
    if isinstance(res, int):  # jax 0.10: the number of residuals
        return fwd, res, nzs_out, tangent
    # jax 0.11+: the forward outputs' types as a tree (primals, residuals, structured residuals); the tangent
    # jaxpr takes the structured ones last, after the tangents: move them next to the other residuals.
    _, plain, structured = res.unpack()
    n_res = len(plain) + len(structured)
    if len(structured):
        n_tangents = len(tangent.invars) - n_res
        to_move = [True] * len(plain) + [False] * n_tangents + [True] * len(structured)
        tangent = _pe.move_binders_to_front(tangent, to_move)
    return fwd, n_res, nzs_out, tangent


def lojax(closed_jaxpr):
    """``closed_jaxpr`` with jax's high-level primitives expanded to the ones
    jax has MLIR rules for, as jax expands a jit's jaxpr before lowering it
    (``Traced.lojax``: ``pe.lower_jaxpr``); ``closed_jaxpr`` itself when it
    has none. jax's library binds such primitives (``call_hi_primitive``:
    ``jnp.searchsorted`` from jax 0.12, ``jax.scipy.linalg.expm`` through
    it); every equation whose primitive says it ``is_high`` is rewritten by
    its ``to_lojax`` rule. Every supported release has this protocol
    (``lower_jaxpr2`` takes a ClosedJaxpr on 0.10, the merged Jaxpr on 0.11+)."""
    if not closed_jaxpr.is_high:
        return closed_jaxpr
    return _pe.lower_jaxpr2(closed_jaxpr)


def high_level_avals(closed_jaxpr) -> list:
    """The operand and result types of ``closed_jaxpr`` that are jax's
    high-level types (a value jax represents by several arrays)."""
    return [a for a in (*closed_jaxpr.in_avals, *closed_jaxpr.out_avals) if getattr(a, "is_high", False)]


def xla_computation(module_text: str):
    """XLA's HLO (an ``XlaComputation``) of a final MHLO module."""
    return _jax.mlir.mlir_module_to_xla_computation(module_text, use_tuple_args=False)


def hlo_text(computation, *, debug_info: bool = False) -> str:
    options = hlo.HloPrintOptions.short_parsable()
    options.print_metadata = debug_info
    return computation.as_hlo_module().to_string(options)


def hlo_cost_analysis(platform: str, computation) -> dict:
    return _jax.hlo_module_cost_analysis(backend(platform), computation.as_hlo_module())


def device_client(devices: Sequence):
    """The PjRt client that owns ``devices`` (as jax compiles for a device
    assignment: ``xb.get_device_backend(devices[0])``), never the default
    backend's: an executable of one client given another client's buffers
    crashes in ``PrepareArguments``."""
    client = devices[0].client
    if any(d.client is not client for d in devices):
        raise ValueError(f"devices {list(devices)} belong to several XLA clients; one program runs on one client's "
                         f"devices")
    return client


def compile_and_load(module_or_text, devices: Sequence, options: _xc.CompileOptions, host_callbacks: Sequence = ()):
    """An executable of ``module_or_text`` on ``devices``, compiled by the client that owns them."""
    kwargs = {"host_callbacks": list(host_callbacks)} if host_callbacks else {}
    return device_client(devices).compile_and_load(module_or_text, _xc.DeviceList(tuple(devices)), options, **kwargs)


def batched_device_put(aval, sharding, pieces, devices, *, force_copy: bool):
    """One jax.Array from per-device host pieces (jaxlib's batched C++ path).

    ``force_copy`` copies each piece so later writes to the caller's numpy
    arrays cannot reach device memory (on CPU the default aliases aligned
    host memory). jaxlib fails ("bad_function_call") if a forced copy is
    asked for a piece that feeds several devices: pass private copies and
    ``force_copy=False`` then.
    """
    return _xc.batched_device_put(aval, sharding, pieces, list(devices), True, force_copy)


#: jaxlib before extension version 489 (jax 0.10.x) checks results unless told not to; later ones never do.
_RESULT_HANDLER_KWARGS = {"_skip_checks": True} if jaxlib_extension_version < 489 else {}


def array_result_handler(aval, sharding):
    return _xc.array_result_handler(aval, sharding, committed=True, **_RESULT_HANDLER_KWARGS)


#: jaxlib 0.12 (extension 495+, IFRT 71+) copies a whole jax.Array to the host through its IFRT array. A
#: replica-mode executable's outputs are per-replica IFRT arrays, which jaxlib's result handler relabels
#: but cannot copy ("Shape mismatch during ToLiteral conversion"): assemble them from the device buffers.
replica_results_need_assembly = jaxlib_extension_version >= 495 and ifrt_version >= 71


def assemble_array(aval, sharding, buffers):
    """One jax.Array of ``aval`` laid out by ``sharding`` from its single-device buffers (no copy)."""
    return _xc.ArrayImpl(aval, sharding, list(buffers), committed=True, **_RESULT_HANDLER_KWARGS)


# -- C++ dispatch (the fast path jax.jit uses) -------------------------------------------

ArrayImpl = _xc.ArrayImpl
#: jax's placement of one argument the C++ path did not get as a ready jax.Array: (x, sharding, layout).
cc_shard_arg = _pxla.cc_shard_arg


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


#: What :func:`at_top_level` reads; a cached call asks it inline: ``trace_ref.value is eval_trace and
#: axis_env_ref.value is top_axis_env`` (C-level attribute reads, no Python frame).
trace_ref, axis_env_ref = _core.trace_state_strong_ref, _core.axis_env_state
eval_trace, top_axis_env = _core.eval_trace, _core.top_axis_env


def at_top_level() -> bool:
    """``_core.trace_state_clean()`` in one frame."""
    return trace_ref.value is eval_trace and axis_env_ref.value is top_axis_env


def dispatch_flatten(tree) -> tuple[list, Any]:
    """``tree``'s leaves and treedef as jaxlib's C++ dispatch flattens it
    (jax's dispatch registry: PRNG key arrays are unpacked too)."""
    return jax_tree_util.dispatch_registry.flatten(tree)


def jit_disabled() -> bool:
    """Whether ``jax.disable_jit()`` is in effect."""
    return bool(_config.disable_jit.value)


def jit_enabled():
    """A context in which ``jax.disable_jit()`` is not in effect (it is part of ``trace_context()``)."""
    return _config.disable_jit(False)


def ir_element_dtype(element_type) -> np.dtype:
    """The numpy dtype of an MLIR element type (``f32``, ``i1``, ``ui8``, ``bf16``, ...)."""
    with element_type.context:
        for dtype, make in _jax_mlir._dtype_to_ir_type.items():
            if make() == element_type:
                return np.dtype(dtype)
    raise TypeError(f"no numpy dtype for the MLIR element type {element_type}")


def is_extended(dtype) -> bool:
    """PRNG keys and other extended dtypes (their buffers are physical arrays)."""
    return _dtypes.issubdtype(dtype, _dtypes.extended)


# -- the persistent compilation cache -------------------------------------------------------

def persistent_cache_enabled() -> bool:
    """Is a persistent cache directory set (jax's or ours)?"""
    return bool(_config.compilation_cache_dir.value)


def persistent_cache_used(platform: str | None = None) -> bool:
    """Do compiles go through the persistent cache, as jax.jit's do: jax's own
    gate (``is_cache_used``: ``jax_enable_compilation_cache`` on, a platform
    that can serialize executables) says yes and jax has a cache (one made from
    ``jax_compilation_cache_dir``, or one set in its place, as jax's tests do)."""
    return compilation_cache.is_cache_used(backend(platform)) and \
        compilation_cache._get_cache(backend(platform)) is not None


def cache_gate_open(platform: str | None = None) -> bool:
    """jax's ``is_cache_used`` alone: jax counts every compile under it as one
    after a persistent-cache miss, a cache or none."""
    return compilation_cache.is_cache_used(backend(platform))


def enable_persistent_cache(path: str, min_compile_time_secs: float) -> None:
    """Points jax's persistent compilation cache at ``path``. jax decides once
    per process whether the cache is used: reset that decision."""
    _config.update("jax_compilation_cache_dir", path)
    _config.update("jax_persistent_cache_min_compile_time_secs", min_compile_time_secs)
    compilation_cache.reset_cache()


def cache_key(module, devices: Sequence, device_ids: np.ndarray, options: _xc.CompileOptions,
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
        with contextlib.suppress(OSError, AttributeError):  # gone already, or not a local directory
            (path / f"{key}{lru_cache._CACHE_SUFFIX}").unlink()


def persistent_cache_thresholds() -> tuple[float, int]:
    """(seconds of compile time, bytes) below which jax writes no cache entry."""
    return (float(_config.persistent_cache_min_compile_time_secs.value),
            int(_config.persistent_cache_min_entry_size_bytes.value))


def is_process_zero() -> bool:
    """jax writes cache entries from the first process of a run only."""
    from jax._src import distributed

    return distributed.global_state.process_id == 0


def serialize_executable(executable) -> bytes:
    return executable.serialize()


def deserialize_executable(data: bytes, devices: Sequence, options: _xc.CompileOptions):
    return device_client(devices).deserialize_executable(data, _xc.DeviceList(tuple(devices)), options)


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


# -- tracers and arrays --------------------------------------------------------------------------

def same_trace(x, y) -> bool:
    """Whether tracers ``x`` and ``y`` belong to one trace."""
    return x._trace is y._trace


float0 = _dtypes.float0


def gspmd_sharding(devices: Sequence, op_sharding) -> _sharding_impls.GSPMDSharding:
    """jax's sharding of an executable's parameter or result as XLA reports
    it (an ``OpSharding`` over the executable's devices, in their order), as
    jax's own ``Compiled`` builds it."""
    return _sharding_impls.GSPMDSharding(tuple(devices), op_sharding)


# -- checkify -----------------------------------------------------------------------------------

def register_checkify(primitive, rule: Callable) -> None:
    """Registers ``rule(context, error, enabled_errors, *operands, **params) ->
    (error, outputs)`` as ``primitive``'s checkify rule. ``context`` numbers
    the error codes of a checkify trace (jax 0.11+), None before; hand it to
    :func:`checkify_jaxpr`."""
    if JAX_VERSION < (0, 11):
        _checkify.error_checks[primitive] = functools.partial(rule, None)
    else:
        _checkify.error_checks[primitive] = rule


def checkify_jaxpr(context, jaxpr, enabled_errors, err_tree, *avals):
    """``jaxpr`` with its checks functionalized: (checked jaxpr taking the error
    leaves then ``jaxpr``'s operands, the pytree of (error, outputs)). With a
    ``context`` (jax 0.11+), jax caches the result and advances its codes."""
    if context is None:
        checked, out_tree, _ = _checkify.jaxpr_to_checkify_jaxpr(jaxpr, enabled_errors, err_tree, *avals)
    else:
        checked, out_tree, _ = _checkify.jaxpr_to_checkify_jaxpr(context, jaxpr, enabled_errors, err_tree, *avals)
    return checked, out_tree


def has_checks(jaxpr) -> bool:
    """Does ``jaxpr`` hold ``checkify.check``s (effects only checkify can discharge)?"""
    return any(isinstance(e, _checkify.ErrorEffect) for e in jaxpr.effects)


# -- jax_debug_nans / jax_debug_infs --------------------------------------------------------------

#: Is jax_debug_nans or jax_debug_infs on?
special_checks_active = _dispatch.needs_check_special
#: The two flags themselves (``.value`` is a C-level read: a cached call asks them inline).
debug_nans_flag, debug_infs_flag = _config.debug_nans, _config.debug_infs
#: What a jax.jit inside a body raises for a nan in its output when its caller reports it.
InternalFloatingPointError = _api_util.InternalFloatingPointError


def debug_nans_active() -> bool:
    return bool(_config.debug_nans.value)


def no_special_values_in_deoptimized(what: str, kind: str) -> None:
    """jax's FloatingPointError for a program whose de-optimized run found no nan/inf."""
    _api_util._raise_no_nan_in_deoptimized(f"Invalid value ({kind}) encountered in {what}")


def set_runtime_tokens(devices, token) -> None:
    """Registers a launch's completion token per device, so that
    ``jax.effects_barrier()`` and jax's exit hook wait for its host callbacks."""
    for i, device in enumerate(devices):
        _dispatch.runtime_tokens.set_output_runtime_token(device, token.get_token(i))


def summarize_frame(frame) -> str:
    """jax's summary of a Python frame's location (``file:line (function)``)."""
    return _source_info_util._summarize_frame(_source_info_util.raw_frame_to_frame(frame.f_code, frame.f_lasti))
