"""pmap on the pxla_mlir pipeline (see :mod:`.api`).

The ``pxla_pmap`` primitive (:mod:`.primitive`) gets its rules here, in one
place (:meth:`.kind.PmapKind.register`): transformations (:mod:`.rules`),
lowerings (:mod:`.mlir_rule`) and the eager impl (:mod:`.lower`).
"""

from pxla_mlir.pmaps.api import PmapFunction, pmap
from pxla_mlir.pmaps.kind import PMAP
from pxla_mlir.pmaps.mlir_rule import PmapInsideJitWarning

PMAP.register()

__all__ = ["pmap", "PmapFunction", "PmapInsideJitWarning", "PMAP"]
