"""Package discovery (everything else is in pyproject.toml).

Every package under ``pxla_mlir/`` is found automatically; the top-level
``passes/`` and ``examples/`` folders are added as ``pxla_mlir.passes`` and
``pxla_mlir.examples`` (pyproject's package-dir), with ``examples/plugins/``
as ``pxla_mlir.examples.plugins``.
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["pxla_mlir", "pxla_mlir.*"]), "pxla_mlir.passes", "pxla_mlir.examples",
                 "pxla_mlir.examples.plugins"])
