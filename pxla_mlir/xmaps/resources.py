"""What an xmap's named axes can run on: the axes of the current mesh and
serial loops.

* The current mesh: the innermost ``with pxla_mlir.Mesh(...)``, else jax's
  own (``with jax.sharding.Mesh(...)`` or ``jax.set_mesh``). A mesh of zero
  dimensions (``Mesh(device.reshape(()), ())``) has no axes to spread over:
  every named axis is vectorized on its one device. 2022's empty mesh
  (``Mesh(np.empty((), dtype=object), ())``) is no mesh.
* Serial loops (2022's loop resources): ``with pxla_mlir.serial_loop('l', 4):``
  makes ``'l'`` a resource whose chunks one device runs one after the other
  (a ``while`` in the MHLO); ``pxla_mlir.SerialLoop(4)`` in
  ``axis_resources`` is an anonymous loop for one named axis.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping

import numpy as np

from pxla_mlir.jaxbridge.jax_internals import jax_mesh_context
from pxla_mlir.mlir.sharding.mesh import Mesh, current_mesh
from pxla_mlir.xmaps.plan import XmapError, XmapTypeError

__all__ = ["SerialLoop", "serial_loop", "active_mesh", "active_loops", "normalize_resources"]


class SerialLoop:
    """An anonymous serial loop of ``length`` iterations for one named axis:
    ``axis_resources={'batch': ('x', SerialLoop(4))}``."""

    def __init__(self, length: int):
        if not isinstance(length, (int, np.integer)) or length < 1:
            raise XmapError(f"SerialLoop needs a positive number of iterations, got {length!r}")
        self.length = int(length)

    def __eq__(self, other):
        return isinstance(other, SerialLoop) and other.length == self.length

    def __hash__(self):
        return hash(("SerialLoop", self.length))

    def __repr__(self) -> str:
        return f"SerialLoop({self.length})"


class _Loops(threading.local):
    def __init__(self):
        self.stack: list[tuple[str, int]] = []


_loops = _Loops()


@contextlib.contextmanager
def serial_loop(name: str, length: int):
    """Makes ``name`` a loop resource of ``length`` iterations in this block
    (also usable as a decorator): a named axis mapped to it runs its chunks
    one after the other on each device."""
    if not isinstance(name, str) or not name:
        raise XmapError(f"serial_loop needs a non-empty name, got {name!r}")
    if not isinstance(length, (int, np.integer)) or length < 1:
        raise XmapError(f"serial_loop {name!r} needs a positive number of iterations, got {length!r}")
    mesh = active_mesh()
    clash = ("a serial_loop of an enclosing block" if any(n == name for n, _ in _loops.stack) else
             "an axis of the current mesh" if mesh is not None and name in mesh.axis_names else None)
    if clash:
        raise XmapError(f"Cannot extend the resource environment with loop named `{name}`. An axis of this name is "
                        f"already defined! {name!r} is {clash}; give the loop another name")
    _loops.stack.append((name, int(length)))
    try:
        yield
    finally:
        _loops.stack.pop()


def active_loops() -> dict[str, int]:
    return dict(_loops.stack)


def loops_in_scope() -> bool:
    return bool(_loops.stack)


#: The jax mesh last found in scope and its pxla_mlir Mesh (jax meshes are immutable): a cached xmap call
#: under ``with jax.sharding.Mesh(...)`` then gets the same Mesh object each time, not a new one to hash.
_converted: tuple = (None, None)


def active_mesh() -> Mesh | None:
    """The current mesh as a pxla_mlir Mesh, or None (no mesh, or an empty one)."""
    global _converted
    mesh = current_mesh()
    if mesh is None:
        found = jax_mesh_context()
        if found is None:
            return None
        last = _converted
        if last[0] is found:
            mesh = last[1]
        else:
            mesh = Mesh(np.asarray(found.devices, dtype=object), tuple(found.axis_names))
            _converted = (found, mesh)
    return None if mesh.no_devices else mesh


def anonymous_loop(axis: str, index: int) -> str:
    return f"{axis}:loop{index}" if index else f"{axis}:loop"


_MAPPING_ARGS = {"axis_sizes": ("sizes", "{'batch': 8}"),
                 "axis_resources": ("resources (a mesh axis name, a SerialLoop, or a tuple of them)",
                                    "{'batch': 'x'}")}


def mapping_arg(value, what: str, fun) -> dict:
    """xmap's ``axis_sizes``/``axis_resources`` as a dict (2022 had no check: a list failed on ``.keys()``)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        values, example = _MAPPING_ARGS[what]
        raise XmapTypeError(f"xmap {what} must be a dict from named axes to {values}, got {value!r} (a "
                            f"{type(value).__name__}) in the xmap of {getattr(fun, '__name__', fun)!r}; write e.g. "
                            f"{what}={example}")
    return dict(value)


def normalize_resources(axis_resources) -> tuple[dict[str, tuple], dict[str, int]]:
    """``{name: resource or tuple}`` -> ``{name: tuple of resource names}``
    and the anonymous loops (``SerialLoop``) it declares, named after their axis."""
    out: dict[str, tuple] = {}
    anonymous: dict[str, int] = {}
    for axis, value in dict(axis_resources).items():
        items = value if isinstance(value, (tuple, list)) else (value,)
        names = []
        for r in items:
            if isinstance(r, SerialLoop):
                loop = anonymous_loop(axis, len([a for a in anonymous if a.startswith(f"{axis}:")]))
                anonymous[loop] = r.length
                names.append(loop)
            elif isinstance(r, str) and r:
                names.append(r)
            else:
                raise XmapError(f"axis_resources of {axis!r}: a resource is a mesh axis name or a SerialLoop, "
                                f"got {r!r}")
        if len(set(names)) != len(names):
            raise XmapError(f"Resource assignment of a single axis must be a tuple of distinct resources, but "
                            f"specified {tuple(items)} for axis {axis}. List each mesh axis or loop once")
        out[axis] = tuple(names)
    return out, anonymous
