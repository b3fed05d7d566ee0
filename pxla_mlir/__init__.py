"""pxla_mlir: JAX parallel maps lowered to pure MHLO through composable MLIR passes.

Importing the package is cheap and jax-free (pxla-opt relies on it); the
jax-facing API (``pmap``, ``Mesh``, ...) is loaded on first use.
"""

import os as _os

# Loading jaxlib's MLIR libraries before jax leaves XLA's C++ logging at INFO
# (device lists on stderr at every backend start); keep jax's own default.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

__version__ = "0.1.0"

_LAZY = {
    "pmap": ("pxla_mlir.pmaps", "pmap"),
    "xmap": ("pxla_mlir.xmaps", "xmap"),
    "jit": ("pxla_mlir.jit", "jit"),
    "sharded_jit": ("pxla_mlir.pmaps.sharded", "sharded_jit"),
    "sharded_jit_constraint": ("pxla_mlir.pmaps.sharded", "with_sharding_constraint"),
    "load": ("pxla_mlir.stages.text_module", "load"),
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
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = importlib.import_module(module)
        value = getattr(value, attr) if attr else value
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pxla_mlir' has no attribute {name!r}")


__all__ = ["__version__", *_LAZY]
