"""The devices of maps inside jax.jit: jax.jit picks its device assignment
from the shardings of arguments, outputs and equations (a shard_map's mesh);
a map's devices join them."""

from __future__ import annotations

from collections.abc import Callable

from pxla_mlir.jaxbridge.jax_internals import dispatch

__all__ = ["register_jit_devices"]

#: primitive -> fn(eqn) -> the shardings (devices) that equation's program needs inside jax.jit.
_JIT_DEVICES: dict = {}


def register_jit_devices(primitive, shardings: Callable) -> None:
    """Tells jax.jit which devices an equation of ``primitive`` runs on:
    ``shardings(eqn)`` gives shardings over them, so ``jax.jit`` of a map is a
    program over the map's devices, and a committed argument on other devices
    is jax's "incompatible devices" error."""
    _JIT_DEVICES[primitive] = shardings


def _intermediate_shardings(jaxpr):
    ours = [eqn for eqn in jaxpr.eqns if eqn.primitive in _JIT_DEVICES]
    if not ours:
        return _jax_intermediate_shardings(jaxpr)
    found = [(s, dispatch.SourceInfo(eqn.source_info, eqn.primitive.name))
             for eqn in ours for s in _JIT_DEVICES[eqn.primitive](eqn)]
    # jax's walk (it recurses through this function) never enters a map's body: nested maps are the map's.
    rest = jaxpr.replace(eqns=[eqn for eqn in jaxpr.eqns if eqn.primitive not in _JIT_DEVICES])
    return found + list(_jax_intermediate_shardings(rest))


_jax_intermediate_shardings = dispatch.patch("get_intermediate_shardings", _intermediate_shardings)
