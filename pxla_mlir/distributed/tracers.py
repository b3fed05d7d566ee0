"""What a tracer was built from: looking through JVP, linearize and batching
tracers (nested ones too) to a concrete value or a staging (jit) tracer."""

from __future__ import annotations

from pxla_mlir.jaxbridge.jax_internals import ad, batching, core, pe

__all__ = ["concrete_value", "primal_tracer", "staged_tracer", "staged_ancestors", "is_differentiated"]


def _built_from(x):
    """``x`` seen through its JVP, linearize and batching tracers (nested ones too)."""
    while isinstance(x, (ad.JVPTracer, ad.LinearizeTracer, batching.BatchTracer)):
        x = x.val if isinstance(x, batching.BatchTracer) else x.primal
    return x


def concrete_value(x):
    """The concrete value a JVP, linearize or batching tracer was built from
    (looking through nested ones), or None for staged tracers (jit, partial eval)."""
    x = _built_from(x)
    return None if isinstance(x, core.Tracer) else x


def primal_tracer(x):
    """What a JVP or linearize tracer differentiates (looking through nested
    ones): the same value, in the same shape."""
    while isinstance(x, (ad.JVPTracer, ad.LinearizeTracer)):
        x = x.primal
    return x


def staged_tracer(x):
    """The tracer of a staging trace (jit) that a JVP, linearize or batching
    tracer was built from (looking through nested ones), or None."""
    x = _built_from(x)
    return x if isinstance(x, pe.DynamicJaxprTracer) else None


def staged_ancestors(x):
    """Every staged tracer that the staged tracer ``x`` was computed from, ``x`` included."""
    seen, todo = set(), [x]
    while todo:
        t = todo.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        yield t
        parent = getattr(t, "parent", None)
        todo.extend(i for i in getattr(parent, "in_tracers", ()) if isinstance(i, pe.DynamicJaxprTracer))


def is_differentiated(x) -> bool:
    """Whether a tracer is being differentiated in reverse mode (its value
    needs a cotangent of its own shape)."""
    while isinstance(x, core.Tracer):
        if isinstance(x, ad.LinearizeTracer):
            return True
        if isinstance(x, ad.JVPTracer):
            x = x.primal
        elif isinstance(x, batching.BatchTracer):
            x = x.val
        else:
            return False
    return False
