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
* a name that differs between releases is bridged in its table
  (``bridged`` names), or below the tables by the thinnest adapter.

Only names and the thinnest adapters over a private API's shape live here.
The bridges built on them live beside this module, in the floor that may
import it: :mod:`.jaxpr_protocols` (rules, linearize, lowering),
:mod:`.executables` (compile, buffers, C++ dispatch) and
:mod:`.cache_access` (jax's persistent cache); our logic that uses them
lives with its users (``stablehlo_lowering.py``, ``runtime/results.py``,
``maps/jit_devices.py``, ...).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, NoReturn

import jax
import numpy as np
from jax._src import (
    api_util as _api_util,
    checkify as _checkify,
    compilation_cache as _compilation_cache,
    compiler as _compiler,
    config as _config,
    core as _core,
    dispatch as _dispatch,
    distributed as _distributed,
    dtypes as _dtypes,
    effects as _effects,
    linear_util as _lu,
    lru_cache as _lru_cache,
    mesh as _jax_mesh,
    sharding_impls as _sharding_impls,
    source_info_util as _source_info_util,
    traceback_util as _traceback_util,
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
    "DropVar Jaxpr JaxprTypeError Literal Primitive ShapedArray Tracer Var axis_env_state check_jaxpr custom_typechecks "
    "eval_jaxpr eval_trace extend_axis_env_nd filter_named_axis_effects gensym get_axis_env jaxprs_in_params "
    "mapped_aval physical_aval positional_effects shaped_abstractify top_axis_env trace_state_clean "
    "trace_state_strong_ref typecompat unmapped_aval valid_jaxtype",
    # jax 0.11 merged ClosedJaxpr into Jaxpr (a Jaxpr carries its consts; ClosedJaxpr(jaxpr, consts) still
    # builds one, and .jaxpr gives the Jaxpr itself; from 0.12 only Jaxpr is left). Named as jax.extend.core
    # names it, without importing jax.extend, whose package imports Pallas: ~15 ms of every process.
    ClosedJaxpr=getattr(_core, "ClosedJaxpr", _core.Jaxpr))
pe = PrivateNames(
    _pe,
    "DynamicJaxprTracer JaxprTracer PartialVal convert_constvars_jaxpr custom_partial_eval_rules dce_jaxpr dce_rules "
    "dce_jaxpr_closed_call_rule has_effects lower_jaxpr2 merge_lists move_binders_to_front new_eqn_recipe "
    "new_jaxpr_eqn partial_eval_jaxpr_custom partial_eval_jaxpr_custom_rules partial_eval_jaxpr_nounits "
    "partition_list trace_to_jaxpr_dynamic")
ad = PrivateNames(
    _ad,
    "JVPTracer LinearizeTracer UndefinedPrimal Zero backward_pass instantiate_zeros is_undefined_primal jvp_jaxpr "
    "linearize_jaxpr primitive_jvps primitive_linearizations primitive_transposes")
batching = PrivateNames(_batching, "BatchTracer batch_jaxpr_axes fancy_primitive_batchers zero_if_mapped")
api_util = PrivateNames(_api_util, "InternalFloatingPointError PytreeLeaf debug_info flatten_axes")
jax_mlir = PrivateNames(
    _jax_mlir,
    "LoweringParameters aval_to_ir_type custom_call dump_module_to_file jaxpr_subcomp lower_fun "
    "lower_jaxpr_to_module make_ir_context refine_polymorphic_shapes register_lowering")
xc = PrivateNames(_xc, "ArrayImpl CompileOptions DeviceList HloSharding XlaComputation array_result_handler "
                       "batched_device_put")
#: jaxlib's C++ extension.
jaxlib_ext = PrivateNames(_jax, "PjitFunctionCache mlir pjit")
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
    "compilation_cache_dir debug_infs debug_nans disable_jit jax_dump_ir_to log_compiles "
    "persistent_cache_min_compile_time_secs "
    "persistent_cache_min_entry_size_bytes trace_context update use_shardy_partitioner",
    # jax 0.11+ has collectives write their groups as mesh axes unless told not to; jax 0.10 has no such flag.
    use_rgv3=getattr(_config, "use_rgv3", None))
effects = PrivateNames(_effects, "lowerable_effects ordered_effects")
dtypes = PrivateNames(_dtypes, "extended float0 issubdtype")
lu = PrivateNames(_lu, "wrap_init")
compiler = PrivateNames(_compiler, "get_compile_options logger")
parallel_primitives = PrivateNames(_parallel, "psum_p")
#: ``test_event``: the events jax's test utilities count (``jtu.count_compilation_after_persistent_cache_miss``).
util = PrivateNames(_util, "test_event")
checkify = PrivateNames(_checkify, "ErrorEffect error_checks jaxpr_to_checkify_jaxpr")
compilation_cache = PrivateNames(_compilation_cache, "_get_cache get_cache_key is_cache_used reset_cache")
lru_cache = PrivateNames(_lru_cache, "_CACHE_SUFFIX")
jax_distributed = PrivateNames(_distributed, "global_state")
tree_util = PrivateNames(jax_tree_util, "dispatch_registry")
#: jax's filtering of its own frames out of tracebacks (``jax_traceback_filtering``), applied to ours too.
traceback_util = PrivateNames(
    _traceback_util,
    "UnfilteredStackTrace _add_call_stack_frames _add_tracebackhide_to_hidden_frames _filtering_mode "
    "_jax_message_append _simplified_tb_msg filter_traceback format_exception_only register_exclusion",
    # where api_boundary's frames come from (jax knows them by this file and their function's name)
    module_file=_traceback_util.__file__)

#: Every table above, for tests/jaxbridge/test_jax_versions.py.
TABLES = (core, pe, ad, batching, api_util, jax_mlir, xc, pxla, source_info_util, sharding_impls, dispatch, config,
          effects, dtypes, lu, compiler, parallel_primitives, util, checkify, compilation_cache, lru_cache,
          jax_distributed, tree_util, traceback_util, jaxlib_ext)


def missing_names() -> list[str]:
    """The private names pxla_mlir lists that the installed jax lacks."""
    return [name for table in TABLES for name in table.missing()]


# Source locations in jaxprs and error messages name the user's line, not ours
# (a nested map is bound from inside pxla_mlir): the whole package, not only this folder.
_source_info_util.register_exclusion(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

__all__ = [
    # jax._src modules, as the names pxla_mlir uses from them
    "ad", "api_util", "batching", "checkify", "compilation_cache", "compiler", "config", "core", "dispatch", "dtypes",
    "effects", "jax_distributed", "jax_mlir", "jaxlib_ext", "lru_cache", "lu", "parallel_primitives", "pe", "pxla",
    "sharding_impls", "source_info_util", "traceback_util", "tree_util", "util", "xc", "JaxAbstractMesh", "ArrayImpl",
    "InternalFloatingPointError", "JaxRuntimeError", "cc_shard_arg", "float0", "ifrt_version",
    "jaxlib_extension_version", "pytree_equality_errors", "special_checks_active", "trace_context", "CHECKED_ON",
    "JAX_VERSION", "JAX_VERSION_TEXT", "PrivateNames", "missing_names",
    # thin adapters over private API shapes
    "backend", "jax_mesh_context", "hlo_text", "hlo_cost_analysis", "at_top_level", "dispatch_flatten",
    "jit_disabled", "trace_ref", "eval_trace", "axis_env_ref", "top_axis_env", "jit_enabled", "ir_element_dtype",
    "is_extended", "backends_are_initialized", "cluster_launch", "distributed_client", "same_trace", "gspmd_sharding",
    "debug_nans_active", "no_special_values_in_deoptimized", "debug_nans_flag", "debug_infs_flag", "summarize_frame"]

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


def hlo_text(computation, *, debug_info: bool = False) -> str:
    options = hlo.HloPrintOptions.short_parsable()
    options.print_metadata = debug_info
    return computation.as_hlo_module().to_string(options)


def hlo_cost_analysis(platform: str, computation) -> dict:
    return _jax.hlo_module_cost_analysis(backend(platform), computation.as_hlo_module())


# -- C++ dispatch (the fast path jax.jit uses) -------------------------------------------

ArrayImpl = _xc.ArrayImpl
#: jax's placement of one argument the C++ path did not get as a ready jax.Array: (x, sharding, layout).
cc_shard_arg = _pxla.cc_shard_arg


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


# -- jax_debug_nans / jax_debug_infs --------------------------------------------------------------

#: Is jax_debug_nans or jax_debug_infs on?
special_checks_active = _dispatch.needs_check_special
#: The two flags themselves (``.value`` is a C-level read: a cached call asks them inline).
debug_nans_flag, debug_infs_flag = _config.debug_nans, _config.debug_infs
#: What a jax.jit inside a body raises for a nan in its output when its caller reports it.
InternalFloatingPointError = _api_util.InternalFloatingPointError


def debug_nans_active() -> bool:
    return bool(_config.debug_nans.value)


def no_special_values_in_deoptimized(what: str, kind: str) -> NoReturn:
    """jax's FloatingPointError for a program whose de-optimized run found no nan/inf."""
    _api_util._raise_no_nan_in_deoptimized(f"Invalid value ({kind}) encountered in {what}")
    raise FloatingPointError(f"Invalid value ({kind}) encountered in {what}")  # jax raised already


def summarize_frame(frame) -> str:
    """jax's summary of a Python frame's location (``file:line (function)``)."""
    return _source_info_util._summarize_frame(_source_info_util.raw_frame_to_frame(frame.f_code, frame.f_lasti))
