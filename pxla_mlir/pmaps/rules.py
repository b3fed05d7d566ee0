"""Transformation rules of the ``pxla_pmap`` primitive: jvp, linearize,
transpose, batching and checkpoint (partial eval), in :data:`PMAP_RULES`, which
:func:`pxla_mlir.maps.rules.register` installs in jax's tables.

The rules themselves are shared with xmap (:mod:`pxla_mlir.maps.rules`):
each transforms the body with jax's jaxpr-to-jaxpr functions under the
pmap's axis and binds the result as a new pmap, so forward and backward
programs both run through pxla_mlir's pipeline. What is pmap's own is how it
names mapped dimensions (an int or None per operand and result, one axis):
residuals leave the devices mapped on axis 0 (as 2022 did), and the
cotangent of an ``in_axes=None`` input is a psum inside the backward pmap.
Transformed bodies are memoized by body identity, so a repeated
``jax.grad(... pmap ...)`` call reuses them (and their compiled programs).
"""

from __future__ import annotations

from jax.dtypes import float0
from jax.lax import psum

from pxla_mlir.jaxbridge.jax_internals import core
from pxla_mlir.maps import rules
from pxla_mlir.pmaps.partition_strategy import UNPARTITIONED
from pxla_mlir.pmaps.primitive import PmapParams, abstract_eval, bind, pxla_pmap_p

__all__ = ["PMAP_RULES"]


class PmapRules(rules.MapRules):
    primitive = pxla_pmap_p
    name = "pmap"

    def bind(self, jaxpr, args, params):
        return bind(jaxpr, args, PmapParams.of(params))

    def abstract_eval(self, params):
        return abstract_eval(**params)

    def env(self, p):
        return [(p["axis_name"], p["axis_size"])]

    def mesh_context(self, p):
        partitioning = p.get("partitioning", UNPARTITIONED)
        return partitioning.tracing(p["axis_name"], p["axis_size"], p.get("backend"), p["name"])

    def residual_specs(self, p, jaxpr, in_specs, n_res):
        return (0,) * n_res

    def global_aval(self, p, spec, aval):
        return core.unmapped_aval(p["axis_size"], spec, aval)

    def copies(self, p, out_spec):
        return p["axis_size"] if out_spec is None else None

    def sum_cotangent(self, p, ct, in_spec):
        # Over one index the sum is the cotangent itself; the all-reduce of a size-1 axis would also
        # sit outside any manual region of a partitioned body, which XLA's partitioner refuses.
        summed = in_spec is None and ct.dtype != float0 and p["axis_size"] > 1
        return psum(ct, p["axis_name"]) if summed else ct

    def batch_operand(self, p, spec, dim):
        if spec is None:
            return dim, None
        return dim - (spec < dim), spec + (dim <= spec)

    def batch_result(self, p, spec):
        return None if spec is None else spec + 1

    def per_element_spec(self, p):
        return 0


PMAP_RULES = PmapRules()
