"""xmap as a map kind (see :mod:`pxla_mlir.maps.kind`)."""

from __future__ import annotations

from pxla_mlir.maps import invariance
from pxla_mlir.maps.checkify_rules import register as register_checkify
from pxla_mlir.maps.kind import JitBody, MapKind
from pxla_mlir.maps.rules import register as register_rules
from pxla_mlir.xmaps import checks, lower, mlir_rule
from pxla_mlir.xmaps.api import XmapFunction, xmap
from pxla_mlir.xmaps.primitive import pxla_xmap_p
from pxla_mlir.xmaps.resources import active_loops, active_mesh
from pxla_mlir.xmaps.rules import XMAP_RULES

__all__ = ["XMAP"]


class XmapKind(MapKind):
    name = "xmap"
    primitive = pxla_xmap_p
    function_type = XmapFunction
    rules = XMAP_RULES

    def from_cli(self, fn, flags: dict, options: dict):
        return xmap(fn, flags["in_axes"], flags["out_axes"], axis_resources=flags.get("axis_resources", {}),
                    axis_sizes=flags.get("axis_sizes", {}), **options)

    def lower_jit(self, jaxpr, eqns, jit: JitBody):
        return lower.lower_jit_body(jaxpr, eqns, jit)

    def environment(self):
        return active_mesh(), tuple(active_loops().items())

    def register(self) -> None:
        register_rules(self.rules)  # jvp, linearize, transpose, batching, partial eval, checkpoint
        register_checkify(self.rules)  # checkify.checkify of the map
        mlir_rule.register()  # xmaps inside pmap bodies and jax.jit
        lower.register_impl()  # an xmap bound with concrete arguments runs its compiled program
        invariance.MAP_RULES[pxla_xmap_p.name] = checks.xmap_names  # named-axis typing of nested xmaps


XMAP = XmapKind()
