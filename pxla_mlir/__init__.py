"""pxla_mlir: JAX parallel maps lowered to pure MHLO through composable MLIR passes.

Importing the package is cheap and jax-free; the jax-facing API is loaded on
first use.
"""

__version__ = "0.1.0"
