"""The MLIR helpers every pass and ``pxla-opt`` use (part of the jax-free floor).

Nothing here imports jax (``pxla-opt`` starts fast because of it): the MLIR
context (:mod:`.context`, the only private jaxlib import), safe IR helpers
(:mod:`.ir_utils`), MHLO builders (:mod:`.mhlo_build`), what MHLO
collectives' device ids mean and which devices they group
(:mod:`.device_groups`), every ``pxla.*`` attribute (:mod:`.pxla_attrs`) and
the one reader of the layout they declare on function boundaries
(:mod:`.boundaries`), Shardy in modules (:mod:`.shardy`), diagnostics and
``--verify-diagnostics`` (:mod:`.diagnostics`, :mod:`.verify_diagnostics`),
the nesting check (:mod:`.nesting_depth`) and the MLIR-aware diff (:mod:`.mlir_diff`).
"""
