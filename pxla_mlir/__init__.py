"""pxla_mlir: JAX parallel maps lowered to pure MHLO through composable MLIR passes.

Importing the package is cheap and jax-free (pxla-opt relies on it); the
jax-facing API (``pmap``, ``Mesh``, ...) is loaded on first use.
"""

import os as _os
from typing import TYPE_CHECKING

# Loading jaxlib's MLIR libraries before jax leaves XLA's C++ logging at INFO
# (device lists on stderr at every backend start); keep jax's own default.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from pxla_mlir.version import __version__

_LAZY = {
    "pmap": ("pxla_mlir.pmaps", "pmap"),
    "xmap": ("pxla_mlir.xmaps", "xmap"),
    "jit": ("pxla_mlir.jit", "jit"),
    "sharded_jit": ("pxla_mlir.pmaps.sharded", "sharded_jit"),
    "sharded_jit_constraint": ("pxla_mlir.pmaps.sharded", "with_sharding_constraint"),
    "load": ("pxla_mlir.stages.text_module", "load"),
    "Lowered": ("pxla_mlir.stages.aot", "Lowered"),
    "Compiled": ("pxla_mlir.stages.aot", "Compiled"),
    "PmapInsideJitWarning": ("pxla_mlir.pmaps", "PmapInsideJitWarning"),
    "XmapInsideJitWarning": ("pxla_mlir.xmaps", "XmapInsideJitWarning"),
    "serial_loop": ("pxla_mlir.xmaps", "serial_loop"),
    "SerialLoop": ("pxla_mlir.xmaps", "SerialLoop"),
    "example_args": ("pxla_mlir.tools.targets", "example_args"),
    "enable_compilation_cache": ("pxla_mlir.runtime.compile", "enable_compilation_cache"),
    "Mesh": ("pxla_mlir.mlir.sharding", "Mesh"),
    "AbstractMesh": ("pxla_mlir.mlir.sharding", "AbstractMesh"),
    "ShardingSpec": ("pxla_mlir.mlir.sharding", "ShardingSpec"),
    "process_local": ("pxla_mlir.distributed", "process_local"),
    "distributed": ("pxla_mlir.distributed", None),
    "register_pass": ("pxla_mlir.mlir.pass_infra.plugins", "register_pass"),
}

# The lazy names as type checkers see them (a test keeps this block equal to _LAZY).
if TYPE_CHECKING:
    from pxla_mlir import distributed as distributed
    from pxla_mlir.distributed import process_local as process_local
    from pxla_mlir.jit import jit as jit
    from pxla_mlir.mlir.pass_infra.plugins import register_pass as register_pass
    from pxla_mlir.mlir.sharding import AbstractMesh as AbstractMesh, Mesh as Mesh, ShardingSpec as ShardingSpec
    from pxla_mlir.pmaps import PmapInsideJitWarning as PmapInsideJitWarning, pmap as pmap
    from pxla_mlir.pmaps.sharded import sharded_jit as sharded_jit, with_sharding_constraint as sharded_jit_constraint
    from pxla_mlir.runtime.compile import enable_compilation_cache as enable_compilation_cache
    from pxla_mlir.stages.aot import Compiled as Compiled, Lowered as Lowered
    from pxla_mlir.stages.text_module import load as load
    from pxla_mlir.tools.targets import example_args as example_args
    from pxla_mlir.xmaps import (
        SerialLoop as SerialLoop,
        XmapInsideJitWarning as XmapInsideJitWarning,
        serial_loop as serial_loop,
        xmap as xmap,
    )


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = importlib.import_module(module)
        value = getattr(value, attr) if attr else value
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pxla_mlir' has no attribute {name!r}")


# Spelled out for type checkers (a test keeps it equal to _LAZY's names).
__all__ = ["__version__", "pmap", "xmap", "jit", "sharded_jit", "sharded_jit_constraint", "load", "Lowered", "Compiled",
           "PmapInsideJitWarning", "XmapInsideJitWarning", "serial_loop", "SerialLoop", "example_args",
           "enable_compilation_cache", "Mesh", "AbstractMesh", "ShardingSpec", "process_local", "distributed",
           "register_pass"]
