"""The ``pxla_xmap`` primitive gets its rules here, in one place:
transformations (:mod:`.rules`), the lowering rule for xmaps inside pmap
bodies and ``jax.jit`` (:mod:`.lowering`), the eager impl (:mod:`.lower`)
and the named-axis typing of nested xmaps (:mod:`.checks`). Imported by
:mod:`.api`, so anything that can bind an xmap has them."""

from . import checks, lower, lowering, rules

rules.register_rules()  # jvp, linearize, transpose, batching, partial eval, checkpoint
lowering.register()  # xmaps inside pmap bodies and jax.jit
lower.register_impl()  # an xmap bound with concrete arguments runs its compiled program

__all__ = ["checks"]
