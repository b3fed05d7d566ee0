"""pxla passes, one per file; the file name is the pass argument without the
``pxla-`` prefix. Registered in :mod:`pxla_mlir.mlir.pass_infra.registry`."""
