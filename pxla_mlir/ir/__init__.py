"""The jax-free floor: MLIR helpers every pass and ``pxla-opt`` use.

Nothing here imports jax (``pxla-opt`` starts fast because of it): the MLIR
context (:mod:`.context`, the only private jaxlib import), safe IR helpers
(:mod:`.ir_utils`), MHLO builders (:mod:`.mhlo_build`), what MHLO collectives'
device ids mean (:mod:`.collectives`), every ``pxla.*`` attribute
(:mod:`.pxla_attrs`), diagnostics and ``--verify-diagnostics``
(:mod:`.diagnostics`, :mod:`.verify_diagnostics`) and the MLIR-aware diff
(:mod:`.mlir_diff`).
"""
