"""``python -m pxla_mlir``: the pxla-mlir command line (``pxla-opt`` is ``python -m pxla_mlir.mlir.cli.pxla_opt``)."""

import sys

from pxla_mlir.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
