"""The passes each jaxlib release registers, one generated module per
release (``jaxlib_0_12_0_1.py`` for jaxlib 0.12.0.1); see
:mod:`pxla_mlir.mlir.pass_infra.jaxlib_passes`."""
