"""xmap's answers to the shared transformation rules (:mod:`pxla_mlir.maps.rules`).

A spec is ``((dim, name), ...)``. Residuals leave the devices mapped along
exactly the named axes they vary over (leading dimensions, plan order), as
2022's xmap did: so a residual never carries two axes that share a resource.
A broadcast operand's cotangent is psum-med over the names it is not mapped
along; an output not mapped along some names is shared by the elements along
them, so its cotangent is divided by their sizes first (see ``transpose``).
"""

from __future__ import annotations

import math

from jax import lax
from jax.dtypes import float0

from pxla_mlir.jaxbridge.jax_internals import core
from pxla_mlir.maps.invariance import named_shapes
from pxla_mlir.maps.rules import MapRules
from pxla_mlir.xmaps.primitive import XmapParams, abstract_eval, bind, insert_axes, names_of, pxla_xmap_p

__all__ = ["XMAP_RULES"]


class XmapRules(MapRules):
    primitive = pxla_xmap_p
    name = "xmap"
    broadcast_spec = ()

    def bind(self, jaxpr, args, params):
        return bind(jaxpr, args, XmapParams.of(params))

    def abstract_eval(self, params):
        return abstract_eval(**params)

    def env(self, p):
        return list(p["axis_sizes"])

    def residual_specs(self, p, jaxpr, in_specs, n_res):
        if not n_res:
            return ()
        order = [n for n, _ in p["axis_sizes"]]
        jaxpr = jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr
        varies = named_shapes(jaxpr, [names_of(s) for s in in_specs])[len(jaxpr.outvars) - n_res:]
        return tuple(tuple(enumerate(n for n in order if n in v)) for v in varies)

    def global_aval(self, p, spec, aval):
        return insert_axes(aval, spec, dict(p["axis_sizes"]))

    def copies(self, p, out_spec):
        mapped = names_of(out_spec)
        unmapped = [s for n, s in p["axis_sizes"] if n not in mapped]
        return math.prod(unmapped) if unmapped else None

    def sum_cotangent(self, p, ct, in_spec):
        mapped = names_of(in_spec)
        missing = tuple(n for n, _ in p["axis_sizes"] if n not in mapped)
        return lax.psum(ct, missing) if missing and ct.dtype != float0 else ct

    def batch_operand(self, p, spec, dim):
        return dim - sum(1 for d, _ in spec if d < dim), tuple((d + (dim <= d), n) for d, n in spec)

    def batch_result(self, p, spec):
        return tuple((d + 1, n) for d, n in spec)

    def per_element_spec(self, p):
        return tuple(enumerate(n for n, _ in p["axis_sizes"]))


XMAP_RULES = XmapRules()
