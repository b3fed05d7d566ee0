"""pmap on the pxla_mlir pipeline (see :mod:`.api`)."""

from ..stages import STATS, Compiled, Lowered
from . import rules  # noqa: F401 (registers the transformation rules)
from .api import PmapFunction, pmap
from .rules import PmapInsideJitWarning

__all__ = ["pmap", "PmapFunction", "PmapInsideJitWarning", "Lowered", "Compiled", "STATS"]
