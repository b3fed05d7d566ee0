"""pmap on the pxla_mlir pipeline (see :mod:`.api`)."""

from ..stages import STATS, Compiled, Lowered
from .api import PmapFunction, pmap

__all__ = ["pmap", "PmapFunction", "Lowered", "Compiled", "STATS"]
