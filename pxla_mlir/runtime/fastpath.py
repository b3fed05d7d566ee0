"""What jaxlib's C++ dispatch needs to run an executable without Python."""

from __future__ import annotations

from collections.abc import Sequence

from pxla_mlir.jaxbridge.jax_internals import pxla
from pxla_mlir.runtime.results import is_empty

__all__ = ["fastpath_data"]


def fastpath_data(xla_executable, outs: Sequence, out_tree, in_shardings: Sequence, out_shardings: Sequence,
                  out_avals: Sequence, const_args: Sequence):
    """What the C++ callable needs to run ``xla_executable`` itself.
    ``in_shardings`` covers ``const_args`` (device-resident, prepended by C++
    on every call) and then the flat arguments."""
    if any(is_empty(av) for av in out_avals):
        return None  # C++ would wrap XLA's buffers of an empty output as they are (see results._empty_result)
    _, dispatch_tree = pxla.reflatten_outputs_for_dispatch(out_tree, list(outs))
    n_in = len(in_shardings)
    return pxla.MeshExecutableFastpathData(
        xla_executable, dispatch_tree, list(in_shardings), list(out_shardings), list(out_avals),
        [True] * len(out_avals), [True] * n_in, [None] * n_in, list(const_args))
