"""pmap on the pxla_mlir pipeline (see :mod:`.api`)."""

from .api import STATS, Compiled, Lowered, PmapFunction, pmap

__all__ = ["pmap", "PmapFunction", "Lowered", "Compiled", "STATS"]
