"""``checkify`` of a map: ``checkify.checkify(pmap(f))`` with ``checkify.check``
(or automatic nan, division, index checks) in ``f``, one rule for every map.

As jax.pmap's (shard_map's) rule does, the body is functionalized with
checkify's own interpreter under the map's axes: the error coming in enters
every element whole, and the error going out has one value per element of
the map, leading dimensions over the mapped axes. ``err.get()`` then reports
each failing element, ``at mapped index 5: ...``, as it does for jax.pmap.
The checked body is bound as a new map, so it runs through pxla_mlir's
pipeline like any other.
"""

from __future__ import annotations

import functools

from jax import tree_util

from pxla_mlir.jaxbridge.jax_internals import core
from pxla_mlir.jaxbridge.jaxpr_protocols import checkify_jaxpr, register_checkify
from pxla_mlir.maps.rules import Ident, MapRules, memo

__all__ = ["register"]


def error_check(kind: MapRules, context, error, enabled_errors, *operands, **p):
    err_vals, err_tree = tree_util.tree_flatten(error)
    err_avals = tuple(core.ShapedArray(a.shape, a.dtype, weak_type=a.weak_type)
                      for a in map(core.shaped_abstractify, err_vals))

    def build():
        with core.extend_axis_env_nd(kind.env(p)):
            return checkify_jaxpr(context, p["jaxpr"], enabled_errors, err_tree, *err_avals, *p["jaxpr"].in_avals)

    if context is not None:  # jax caches it, and must count its error codes on every call
        checked, out_tree = build()
    else:
        checked, out_tree = memo(("checkify", kind.name, Ident(p["jaxpr"]), frozenset(enabled_errors), err_tree,
                                  err_avals), build)
    n_errors_out = out_tree.num_leaves - len(p["out_axes"])
    params = dict(p, name=f"checkify({p['name']})", in_axes=(kind.broadcast_spec,) * len(err_vals) + p["in_axes"],
                  out_axes=(kind.per_element_spec(p),) * n_errors_out + p["out_axes"],
                  donated=(False,) * len(err_vals) + tuple(p["donated"]))
    del params["jaxpr"]
    outs = kind.bind(checked, [*err_vals, *operands], params)
    return tree_util.tree_unflatten(out_tree, outs)


def register(kind: MapRules) -> None:
    """Installs the checkify rule of ``kind.primitive``."""
    register_checkify(kind.primitive, functools.partial(error_check, kind))
