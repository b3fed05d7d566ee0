"""Floor 4, the top of the jax-free floor: the commands that need no jax.
``pxla-opt`` (:mod:`.pxla_opt`, with :mod:`.opt_flags`, :mod:`.opt_driver`
and :mod:`.dump_filter`), the pass documentation (:mod:`.docs`), FileCheck
lines from a printed module (:mod:`.gen_checks`) and the full-flag argument
parser every command line uses (:mod:`.argparsing`). They may import floors 0-4 (``pxla_mlir.mlir``,
``pxla_mlir.passes``, ``pxla_mlir.errors``), never jax; the jax-side
commands of ``pxla-mlir`` are in ``pxla_mlir.tools``.
"""
