"""pmap as a map kind (see :mod:`pxla_mlir.maps.kind`)."""

from __future__ import annotations

from pxla_mlir.maps.checkify_rules import register as register_checkify
from pxla_mlir.maps.kind import JitBody, MapKind
from pxla_mlir.maps.rules import register as register_rules
from pxla_mlir.mlir.pipelines import PmapPipeline, configure
from pxla_mlir.pmaps import lower, mlir_rule
from pxla_mlir.pmaps.api import PmapFunction, pmap
from pxla_mlir.pmaps.primitive import JIT_AXIS, PmapParams, pxla_pmap_p
from pxla_mlir.pmaps.rules import PMAP_RULES

__all__ = ["PMAP"]


class PmapKind(MapKind):
    name = "pmap"
    primitive = pxla_pmap_p
    function_type = PmapFunction
    rules = PMAP_RULES

    def from_cli(self, fn, flags: dict, options: dict):
        axes = {k: flags[k] for k in ("in_axes", "out_axes") if k in flags}
        return pmap(fn, flags.get("axis_name"), **axes, **options)

    def check_example_shapes(self, fn, shapes):
        axes = fn.in_axes
        per_arg = [axes] * len(shapes) if axes is None or isinstance(axes, int) else list(axes)
        if len(per_arg) != len(shapes):
            return None  # the pmap itself reports the mismatch
        for i, (axis, shape) in enumerate(zip(per_arg, shapes)):
            if isinstance(axis, int) and -len(shape) <= axis < len(shape) and shape[axis] == 0:
                return i, (f"has size 0 along its mapped axis {axis}: a pmap needs one device per index, so give "
                           f"that dimension a positive size")
        return None

    def lower_jit(self, jaxpr, eqns, jit: JitBody):
        # One replica-mode program over the pmaps' devices: the body is a pmap of size 1, every value broadcast.
        params = PmapParams(JIT_AXIS, 1, (None,) * len(jit.global_avals), (None,) * len(jaxpr.out_avals), jit.name,
                            jit.devices, jit.backend, jit.donated, configure(PmapPipeline, **jit.options))
        return lower.lower_traced(jaxpr, params, jit.global_avals, signature=jit.signature, kind="jit")

    def register(self) -> None:
        register_rules(self.rules)  # jvp, linearize, transpose, batching, partial eval, checkpoint
        register_checkify(self.rules)  # checkify.checkify of the map
        mlir_rule.register()  # nested pmaps, and pmaps inside jax.jit
        lower.register_impl()  # a pmap bound with concrete arguments runs its compiled program


PMAP = PmapKind()
