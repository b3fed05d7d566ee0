"""This process's share of a global value: host inputs in, numpy out.

In a multi-process run each process holds some pieces of every global
value: the pieces its devices hold. Its *share* is those pieces put side by
side in global order (per dimension, the distinct index ranges its devices
hold, sorted), which is what ``jax.make_array_from_process_local_data``
takes. With the default process-major devices, process ``p``'s share of a
mapped axis of global size ``L * P`` is rows ``[p * L, (p + 1) * L)``.

A host input (numpy, Python scalars, a jax.Array held by this process
alone) given to a pmap is this process's share: its mapped axis is
multiplied by the process count. Given to an xmap it is the share of every
named dimension whose mesh axes span processes (:func:`share_factor` says
how many times longer each is); given to ``pxla_mlir.jit``, of what the maps
inside take directly (:mod:`.jit_shares`). jax.Arrays spanning processes are global
as they are. A value traced by jax.vmap, jax.jvp or jax.grad keeps the
locality of the value it was made from; values staged by jax.jit have none
and are global. The runtime then reads a host value by its shape (the whole
global value, or this process's share); nothing is gathered between hosts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding

from pxla_mlir.distributed.processes import MultiProcessError, process_count, spans_processes
from pxla_mlir.distributed.tracers import concrete_value, is_differentiated
from pxla_mlir.jaxbridge.jax_internals import core
from pxla_mlir.jaxbridge.placement import piece_plan, put_pieces

__all__ = ["Share", "LocalPlacement", "is_global", "is_process_local", "global_avals", "bound_avals",
           "share_factor", "scaled_avals",
           "process_local", "share_note", "local_sharding", "host_local_outputs"]


def is_global(x) -> bool:
    """A jax.Array (or ShapeDtypeStruct) whose sharding spans several processes."""
    sharding = getattr(x, "sharding", None)
    return isinstance(sharding, jax.sharding.Sharding) and not sharding.is_fully_addressable


def is_process_local(x) -> bool:
    """Whether a pmap argument is this process's share rather than a global value.

    A traced value is looked through to the concrete value it was made from
    (jax.jvp, jax.vmap, jax.grad keep it); staged values have none and are global.
    """
    if isinstance(x, core.Tracer):
        x = concrete_value(x)
        if x is None:
            return False
    return not is_global(x)


def global_avals(leaves: Sequence, avals: Sequence, axes: Sequence,
                 name_of: Callable[[int], str] = lambda i: f"argument {i}", devices: Sequence | None = None) -> list:
    """The global avals of a pmap call's flat arguments: in a multi-process run
    a process-local mapped argument's axis counts every process's share
    (unless the pmap's ``devices`` are this process's alone)."""
    count = process_count()
    if count == 1 or (devices is not None and not spans_processes(devices)):
        return list(avals)
    out = []
    for i, (x, aval, axis) in enumerate(zip(leaves, avals, axes)):
        if axis is not None and is_process_local(x):
            if is_differentiated(x):
                raise MultiProcessError(
                    f"pmap argument {name_of(i)} is differentiated in reverse mode (jax.grad, jax.vjp) and is this "
                    f"process's share of the mapped axis: jax wants its cotangent in the share's shape "
                    f"{tuple(aval.shape)}, but the pmap's is global. Make it a global jax.Array first, e.g. "
                    f"jax.make_array_from_process_local_data(NamedSharding(Mesh(jax.devices(), ('i',)), "
                    f"PartitionSpec('i')), x_local); its gradient is then global too (pxla_mlir.process_local "
                    f"gives this process's rows)")
            shape = list(aval.shape)
            shape[axis] *= count
            aval = core.ShapedArray(tuple(shape), aval.dtype, weak_type=aval.weak_type)
        out.append(aval)
    return out


def share_factor(devices: np.ndarray, axis_names: Sequence[str], axes: Sequence[str]) -> int:
    """How many times this process's share of a dimension split over the mesh
    ``axes`` (of a mesh of ``devices`` with ``axis_names``) goes into the
    whole dimension: the positions along those axes in the mesh over those
    this process's devices hold (1 where it holds them all, or none)."""
    pos = [list(axis_names).index(a) for a in axes]
    if not pos:
        return 1
    total = int(np.prod([devices.shape[p] for p in pos]))
    me = jax.process_index()
    held = {tuple(i[p] for p in pos) for i, device in np.ndenumerate(devices) if device.process_index == me}
    return total // len(held) if held and total % len(held) == 0 else 1


def scaled_avals(leaves: Sequence, avals: Sequence, factors: Sequence[dict], name_of: Callable[[int], str],
                 what: str) -> list:
    """The global avals of a map call in a multi-process run: a host input
    (process-local, see :func:`is_process_local`) is this process's share,
    so each dimension ``d`` of leaf ``i`` is ``factors[i][d]`` times longer;
    global jax.Arrays and traced values without a concrete one are global."""
    out = []
    for i, (x, aval, grow) in enumerate(zip(leaves, avals, factors)):
        grow = {d: f for d, f in grow.items() if f > 1}
        if grow and is_process_local(x):
            if is_differentiated(x):
                raise MultiProcessError(
                    f"{what} argument {name_of(i)} is differentiated in reverse mode (jax.grad, jax.vjp) and is "
                    f"this process's share of mapped axes that span processes: jax wants its cotangent in the "
                    f"share's shape {tuple(aval.shape)}, but the map's is global. Make it a global jax.Array first "
                    f"(jax.make_array_from_process_local_data with the map's input sharding)")
            shape = [n * grow.get(d, 1) for d, n in enumerate(aval.shape)]
            aval = core.ShapedArray(tuple(shape), aval.dtype, weak_type=aval.weak_type)
        out.append(aval)
    return out


def bound_avals(args: Sequence, in_axes: Sequence, axis_size: int) -> tuple:
    """The global avals of a bound pmap's concrete arguments (its impl): a
    mapped argument whose axis is ``axis_size / P`` long is this process's share."""
    count = process_count()
    out = []
    for x, axis in zip(args, in_axes):
        aval = core.shaped_abstractify(x)
        shape = list(aval.shape)
        if count > 1 and axis is not None and shape[axis] != axis_size and shape[axis] * count == axis_size:
            shape[axis] = axis_size
        out.append(core.ShapedArray(tuple(shape), aval.dtype, weak_type=aval.weak_type))
    return tuple(out)


def share_note() -> str:
    """A hint for size errors in a multi-process run ('' in a single process)."""
    count = process_count()
    if count == 1:
        return ""
    return (f"\n(this run has {count} processes: a host array is this process's share, so its mapped axis is "
            f"counted {count} times; jax.Arrays spanning processes and traced values are global)")


@dataclasses.dataclass(frozen=True)
class Share:
    """Where each local piece of a global value sits in this process's share."""

    global_shape: tuple
    shape: tuple
    local_index: tuple  # per local piece: slices into the share

    @classmethod
    def of(cls, global_shape: Sequence[int], indices: Sequence[tuple]) -> Share:
        global_shape = tuple(int(s) for s in global_shape)
        spans = [[_span(index[d], size) for index in indices] for d, size in enumerate(global_shape)]
        offsets, shape = [], []
        for d, dim_spans in enumerate(spans):
            at, total, end = {}, 0, None
            for start, stop in sorted(set(dim_spans)):
                if end is not None and start < end:
                    raise MultiProcessError(
                        f"this process's pieces overlap along dimension {d} ({start}:{stop} and an earlier piece "
                        f"ending at {end}), so they do not form one local block; pass a global jax.Array")
                at[(start, stop)] = total
                total, end = total + stop - start, stop
            offsets.append(at)
            shape.append(total)
        local = tuple(tuple(slice(offsets[d][s], offsets[d][s] + s[1] - s[0]) for d, s in enumerate(piece))
                      for piece in zip(*spans)) if spans else tuple(() for _ in indices)
        boxes = {tuple((i.start, i.stop) for i in piece) for piece in local}
        if sum(int(np.prod([b - a for a, b in box])) for box in boxes) != int(np.prod(shape)):
            raise MultiProcessError("this process's pieces leave holes in the block they span (its devices do not "
                                    "form a sub-grid of the mesh); pass a global jax.Array")
        return cls(global_shape, tuple(shape), local)


def _span(index: slice, size: int) -> tuple[int, int]:
    start, stop, step = index.indices(size)
    if step != 1:
        raise MultiProcessError(f"strided piece {index} cannot be part of a local block")
    return start, stop


class LocalPlacement:
    """Puts host values of a multi-process executable's inputs on this process's devices."""

    def __init__(self, devices: Sequence, in_shardings: Sequence, in_avals: Sequence):
        me = jax.process_index()
        self.devices = [d for d in devices if d.process_index == me]
        self._plans: list = []  # per input: the whole value's plan, the share's plan, the share's shape (or error)
        self._local_shardings: list = []  # per input: the layout of a host-local jax.Array holding the share
        for sharding, aval in zip(in_shardings, in_avals):
            by_device = sharding.devices_indices_map(tuple(aval.shape))
            whole = piece_plan([by_device[d] for d in self.devices])
            try:
                share = Share.of(aval.shape, whole[0])
                self._plans.append((whole, piece_plan(share.local_index), share.shape))
            except MultiProcessError as e:
                self._plans.append((whole, None, e))
            self._local_shardings.append(local_sharding(sharding))

    def place(self, x, index: int, aval, sharding) -> jax.Array:
        whole, local, share_shape = self._plans[index]
        held = self._local_shardings[index]
        if isinstance(x, jax.Array) and held is not None and x.shape == share_shape and x.dtype == aval.dtype \
                and x.sharding.is_equivalent_to(held, x.ndim):
            # A host-local Array laid out as pmap returns them (jax.pmap's outputs): its buffers, no copy.
            by_device = {s.device: s.data for s in x.addressable_shards}
            return jax.make_array_from_single_device_arrays(
                tuple(aval.shape), sharding, [by_device[d] for d in sharding.addressable_devices])
        host = np.asarray(x, dtype=aval.dtype)
        if host.shape == tuple(aval.shape):
            plan = whole
        elif local is not None and host.shape == share_shape:
            plan = local
        else:
            raise TypeError(_shape_message(host.shape, aval, share_shape))
        return put_pieces(host, plan, aval, sharding, self.devices)


def _shape_message(shape, aval, share_shape) -> str:
    text = f"argument of shape {shape} does not match the compiled {aval.str_short()}: "
    if isinstance(share_shape, Exception):
        return text + f"give the whole value {tuple(aval.shape)} or a global jax.Array ({share_shape})"
    text += (f"a host value on process {jax.process_index()} is either its share {share_shape} (the pieces its "
             f"devices hold) or the whole value {tuple(aval.shape)}")
    if share_shape == tuple(aval.shape):
        text += ("; here this process's devices hold every index of the value (its rows also live on other "
                 "processes' devices), so pass the whole value or a global jax.Array built with "
                 "jax.make_array_from_callback and the Lowered's in_shardings")
    return text


def local_sharding(sharding) -> NamedSharding | None:
    """The layout of this process's part of a value laid out by ``sharding``,
    over this process's devices (as jax.pmap lays out its host-local results),
    or None where its devices do not form one block of the mesh."""
    local = _local_mesh(sharding)
    return NamedSharding(local, sharding.spec) if local is not None else None


def _local_mesh(sharding) -> Mesh | None:
    """The mesh of :func:`local_sharding`."""
    if not isinstance(sharding, NamedSharding):
        return None
    mesh = sharding.mesh
    if not isinstance(mesh, Mesh):  # an abstract mesh has no devices
        return None
    me = jax.process_index()
    try:
        if mesh.devices.ndim == 1:  # any order: its local devices, in mesh order
            return Mesh(np.array([d for d in mesh.devices if d.process_index == me], dtype=object), mesh.axis_names)
        return mesh.local_mesh
    except ValueError:
        return None


def host_local_outputs(outs: Sequence, shardings: Sequence) -> list:
    """A multi-process pmap's results as jax.pmap returns them: each this
    process's part (its rows of a mapped result, a replicated one whole) as
    an Array on its own devices, readable with ``np.asarray``; the buffers
    are the global result's, not copied. A result whose local devices do not
    form one block of the mesh stays global."""
    return [_host_local(y, s) for y, s in zip(outs, shardings)]


def _host_local(y, sharding):
    local = _local_mesh(sharding)
    if local is None:
        return y
    held = NamedSharding(local, sharding.spec)
    if isinstance(y, np.ndarray):  # float0 results are host zeros
        indices = [sharding.devices_indices_map(y.shape)[d] for d in local.devices.flat]
        shape = Share.of(y.shape, indices).shape
        if y.dtype == jax.dtypes.float0:  # jax.pmap gives a multi-process run's as bool zeros on its devices
            zeros = np.zeros(shape, np.bool_)
            return jax.make_array_from_callback(shape, held, lambda index: zeros[index])
        return np.zeros(shape, y.dtype)
    if not isinstance(y, jax.Array) or y.is_fully_addressable:
        return y
    # Key arrays: their data, wrapped again. (jax.dtypes re-exports issubdtype without "as", which
    # pyright reads as private.)
    if jax.dtypes.issubdtype(y.dtype, jax.dtypes.extended):  # pyright: ignore[reportPrivateImportUsage]
        return jax.random.wrap_key_data(_host_local(jax.random.key_data(y), sharding),
                                        impl=jax.random.key_impl(y))
    try:
        shape = Share.of(y.shape, [s.index for s in y.addressable_shards]).shape
    except MultiProcessError:
        return y
    by_device = {s.device: s.data for s in y.addressable_shards}
    return jax.make_array_from_single_device_arrays(shape, held, [by_device[d] for d in local.devices.flat])


def process_local(tree):
    """This process's part of every array in ``tree``, as numpy: for a global
    jax.Array the pieces its devices hold, side by side in global order (for
    a pmap output with the default devices, rows ``[p*L, (p+1)*L)``); a
    replicated value whole; anything else ``np.asarray`` of it."""
    return jax.tree_util.tree_map(_local_value, tree)


def _local_value(y):
    if not (isinstance(y, jax.Array) and not y.is_fully_addressable):
        return np.asarray(y)
    shards = y.addressable_shards
    share = Share.of(y.shape, [s.index for s in shards])
    out = np.empty(share.shape, dtype=y.dtype)
    done = set()
    for shard, index in zip(shards, share.local_index):
        key = tuple((s.start, s.stop) for s in index)
        if key not in done:
            done.add(key)
            out[index] = np.asarray(shard.data)
    return out
