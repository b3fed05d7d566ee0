"""xmap on the pxla_mlir pipeline (see :mod:`.api`).

The ``pxla_xmap`` primitive (:mod:`.primitive`) gets its rules here, in one
place (:meth:`.kind.XmapKind.register`): transformations (:mod:`.rules`),
the lowering rule for xmaps inside pmap bodies and ``jax.jit``
(:mod:`.mlir_rule`), the eager impl (:mod:`.lower`) and the named-axis
typing of nested xmaps (:mod:`.checks`).
"""

from pxla_mlir.xmaps.api import LOWERINGS, XmapFunction, xmap
from pxla_mlir.xmaps.kind import XMAP
from pxla_mlir.xmaps.mlir_rule import XmapInsideJitWarning
from pxla_mlir.xmaps.plan import XmapError, XmapMeshError, XmapTypeError, XmapUnsupportedError
from pxla_mlir.xmaps.resources import SerialLoop, serial_loop

XMAP.register()

__all__ = ["xmap", "XmapFunction", "LOWERINGS", "XmapError", "XmapTypeError", "XmapMeshError", "XmapUnsupportedError",
           "serial_loop", "SerialLoop", "XmapInsideJitWarning", "XMAP"]
