"""Command-line tools: pxla-opt and pxla-mlir."""
