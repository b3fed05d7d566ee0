"""Floor 5: the bridge to jax. :mod:`.jax_internals` is the one module that
imports ``jax._src``; :mod:`.jaxpr_protocols`, :mod:`.executables` and
:mod:`.cache_access` bridge jax's protocols, jaxlib's client and jax's
persistent cache on its names; :mod:`.stablehlo_lowering` lowers jaxprs to
StableHLO with jax's rules, :mod:`.pytree_depth` refuses arguments nested
deeper than jax can flatten and :mod:`.placement` puts host values onto
devices. Modules here may import jax, the jax-free floor (``pxla_mlir.mlir``)
and each other; ``pxla_mlir.distributed``, ``pxla_mlir.runtime`` and
everything above build on them.
"""
