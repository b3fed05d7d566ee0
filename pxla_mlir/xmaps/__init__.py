"""xmap on the pxla_mlir pipeline (see :mod:`.api`)."""

from .api import LOWERINGS, XmapFunction, xmap
from .plan import XmapError

__all__ = ["xmap", "XmapFunction", "XmapError", "LOWERINGS"]
