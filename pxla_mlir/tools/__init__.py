"""The jax side of the command line, floor 12: pxla-mlir and its subcommands, one module each
(pxla-opt and the jax-free commands are in pxla_mlir/mlir/cli/)."""
