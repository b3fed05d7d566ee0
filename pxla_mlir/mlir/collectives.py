"""Every collective pxla_mlir knows, in one table of facts (the jax layer).

One entry per jax primitive says:

* ``axes_param``: the parameter naming its axes (``axes`` or ``axis_name``);
* ``agrees``: whether its result is the same on every device of those axes
  (psum, pmax, pmin, all_gather). Otherwise the result varies along them
  (ppermute, axis_index, ...); with ``axis_index_groups`` nothing agrees.
  :mod:`..maps.invariance` uses it for ``out_axes=None`` and xmap's output checks;
* ``mhlo``: the MHLO collectives jax lowers it to. Passes recognise those by
  their op names and read their device groups through the jax-free
  :mod:`.core.device_groups` (``tests/maps/test_collectives.py`` checks that every
  name here is one it knows).

How a map kind rebinds a collective is the kind's own business: xmap's
rules are ``xmaps/rewrites.RULES``, keyed by the same primitive names (a
test ties the two tables). Adding a collective is one entry here, plus a
rule there when vmap cannot split it over a mix of local and device axes.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Collective", "COLLECTIVES", "CALL_JAXPR_PARAMS", "axes_of"]


@dataclasses.dataclass(frozen=True)
class Collective:
    primitive: str
    axes_param: str
    agrees: bool
    mhlo: tuple[str, ...] = ()


COLLECTIVES: dict[str, Collective] = {c.primitive: c for c in (
    Collective("psum", "axes", True, ("mhlo.all_reduce",)),
    Collective("pmax", "axes", True, ("mhlo.all_reduce",)),
    Collective("pmin", "axes", True, ("mhlo.all_reduce",)),
    Collective("all_gather", "axis_name", True, ("mhlo.all_gather",)),
    Collective("axis_index", "axis_name", False),
    Collective("ppermute", "axis_name", False, ("mhlo.collective_permute",)),
    Collective("all_to_all", "axis_name", False, ("mhlo.all_to_all",)),
    Collective("reduce_scatter", "axis_name", False, ("mhlo.reduce_scatter",)),
    # Every element gets element `source`'s value (jax lowers it on GPU only).
    Collective("pbroadcast", "axis_name", True, ("mhlo.collective_broadcast",)),
    # Varying-manual-axes bookkeeping of jax's shard_map; treated as varying.
    Collective("psum_invariant", "axes", False, ("mhlo.all_reduce",)),
    Collective("pvary", "axes", False),
    Collective("all_gather_invariant", "axis_name", False, ("mhlo.all_gather",)),
)}

#: Call-like primitives and the parameter holding their body (analysed or
#: inlined where they appear, instead of being treated as opaque).
CALL_JAXPR_PARAMS = {"jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
                     "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "remat": "jaxpr",
                     "checkpoint": "jaxpr"}


def axes_of(eqn) -> tuple:
    """The named axes a collective uses (() for every other primitive)."""
    entry = COLLECTIVES.get(eqn.primitive.name)
    if entry is None or entry.axes_param not in eqn.params:
        return ()
    names = eqn.params[entry.axes_param]
    return tuple(names) if isinstance(names, (tuple, list)) else (names,)
