"""pmap on the pxla_mlir pipeline (see :mod:`.api`).

The ``pxla_pmap`` primitive (:mod:`.primitive`) gets its rules here, in one
place: transformations (:mod:`.rules`), lowerings (:mod:`.lowering`) and
the eager impl (:mod:`.lower`).
"""

from ..stages import STATS, Compiled, Lowered
from . import lower, lowering, rules
from .api import PmapFunction, pmap
from .lowering import PmapInsideJitWarning

rules.register()  # jvp, linearize, transpose, batching, partial eval, checkpoint
lowering.register()  # nested pmaps, and pmaps inside jax.jit
lower.register_impl()  # a pmap bound with concrete arguments runs its compiled program

__all__ = ["pmap", "PmapFunction", "PmapInsideJitWarning", "Lowered", "Compiled", "STATS"]
