"""Running a compiled map: place inputs, execute, wrap outputs as jax.Arrays.

``execute_sharded`` checks almost nothing (a wrong byte size or device order
segfaults the process, a wrong dtype of equal size computes garbage, a
deleted or donated buffer segfaults), so every argument is checked and
brought to exactly the expected shape, dtype and sharding first. Host arrays
go to the devices piece by piece (:mod:`..jaxbridge.placement`); results become
``jax.Array`` s through result handlers, without a host round trip. PRNG key
arrays travel as their uint32 data and float0 values as bool zeros, as in
jax. Every launch of a program over several CPU devices counts against the
in-flight window (:mod:`.inflight`); every launch runs under the launch lock
with its arguments checked there (:mod:`.launches`), never from inside one of
its own host callbacks, and never when its outputs
cannot fit in memory (:mod:`.memory`); a launch with host callbacks completes
before the call returns and raises what a callback raised (:mod:`.callbacks`);
a multi-process launch first agrees with the other processes
(:mod:`pxla_mlir.distributed.program_check`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Protocol, TypeAlias

import jax
import numpy as np

from pxla_mlir.distributed.processes import MultiProcessError, spans_processes
from pxla_mlir.distributed.shares import LocalPlacement, is_global
from pxla_mlir.jaxbridge.executables import set_runtime_tokens
from pxla_mlir.jaxbridge.jax_internals import core, float0, is_extended
from pxla_mlir.jaxbridge.placement import piece_indices, put_pieces
from pxla_mlir.runtime.callbacks import GuardedCallbacks, refuse_inside_callback
from pxla_mlir.runtime.donation import check_donations
from pxla_mlir.runtime.inflight import remember_launch, windowed
from pxla_mlir.runtime.launches import LAUNCHES, deleted_message
from pxla_mlir.runtime.memory import ResourceExhaustedError, shortfall
from pxla_mlir.runtime.results import needs_assembly, physical, result_handler, typed_aval

#: A ``jax.Device``: jaxlib ships no stubs for the class, so type checkers cannot name it.
Device: TypeAlias = Any


class ExecutableLayout(Protocol):
    """Where an executable's flat inputs and outputs live (a :class:`pxla_mlir.stages.lowering.Layout`)."""

    @property
    def devices(self) -> Sequence[Device]: ...
    @property
    def in_avals(self) -> Sequence: ...
    @property
    def out_avals(self) -> Sequence: ...
    @property
    def in_shardings(self) -> Sequence: ...
    @property
    def out_shardings(self) -> Sequence: ...
    @property
    def donated(self) -> Sequence[bool]: ...


class ShardedExecutable:
    """An XLA executable and everything needed to call it with global arrays
    laid out by ``layout`` (shardings over its devices, in the executable's
    device order; ``layout.donated`` flags the inputs whose buffers the
    executable consumes). ``callbacks`` are the program's guarded host
    callbacks (its launches are then registered with jax's runtime tokens);
    ``agreement`` runs each launch once every process launches the same
    program (multi-process runs); ``what`` names the map in messages;
    ``replicas``: the program runs in replica mode."""

    def __init__(self, xla, layout: ExecutableLayout, *, keepalive=None, callbacks: GuardedCallbacks | None = None,
                 agreement=None, what: str = "the map", replicas: bool = False):
        devices, in_shardings, out_shardings = layout.devices, layout.in_shardings, layout.out_shardings
        in_avals, out_avals, donated = layout.in_avals, layout.out_avals, layout.donated
        self.xla = xla
        self.what = what
        self.devices = list(devices)
        self.windowed = windowed(self.devices)  # its launches count against the in-flight window
        self.in_shardings, self.out_shardings = list(in_shardings), list(out_shardings)
        self.in_avals = tuple(in_avals)
        # Results carry their sharding in their type, as jax.jit's and jax.pmap's do (jax.typeof(out).sharding).
        self.out_avals = tuple(typed_aval(av, s) for av, s in zip(out_avals, out_shardings))
        self.keepalive = keepalive  # what must outlive the executable (jax's lowering keepalive)
        self.callbacks = callbacks
        self.agreement = agreement
        # Launches with host callbacks, or agreed between processes, must not skip Python.
        self.has_effects = callbacks is not None or agreement is not None
        self.donated = tuple(donated) or (False,) * len(self.in_avals)
        self._donated_args = [i for i, d in enumerate(self.donated) if d]
        self._callback_devices = xla.local_devices() if callbacks is not None else None
        self.too_big = shortfall(xla, self.devices, what)  # why its outputs cannot fit, or None
        self._physical = [physical(av, s) for av, s in zip(self.in_avals, self.in_shardings)]
        self._logical = [is_extended(av.dtype) or av.dtype == float0 for av in self.in_avals]
        self._pieces = [piece_indices(s, av.shape, self.devices) for av, s in self._physical]
        self._local = LocalPlacement(self.devices, [s for _, s in self._physical], [av for av, _ in self._physical]) \
            if spans_processes(self.devices) else None  # multi-process: host values are placed per process
        self._handlers = [result_handler(av, s, replicas=replicas) for av, s in zip(self.out_avals, self.out_shardings)]
        self.assembles_results = needs_assembly(replicas)  # then C++ dispatch cannot wrap its outputs

    # -- arguments -----------------------------------------------------------------
    def place(self, x, index: int):
        """Argument ``index`` as a jax.Array laid out as the executable expects."""
        logical = self.in_avals[index]
        aval, sharding = self._physical[index]
        if self._logical[index]:  # stored as another array
            share = self._local is not None and not is_global(x)  # multi-process: it may be this process's share
            _check_type(x, logical, index, shape=not share)
            if logical.dtype == float0:
                x = np.zeros(np.shape(x), np.bool_)  # as jax: float0 travels as bool zeros
            else:
                x = jax.random.key_data(x)  # a key array's uint32 data, no copy
        if isinstance(x, core.Tracer):  # a table's class: pyright cannot narrow to it
            raise TypeError(f"argument {index} is a traced value ({x.aval.str_short()}); a compiled map runs on "  # pyright: ignore[reportAttributeAccessIssue]
                            f"concrete arrays: call the map itself under the transformation")
        if self._local is not None and not is_global(x):  # multi-process: this process's share (distributed/)
            return self._local.place(x, index, aval, sharding)
        if self._local is None and is_global(x):
            raise MultiProcessError(
                f"argument {index} is a jax.Array that spans processes, but this program runs on this process's "
                f"devices alone (a per-process map, e.g. devices=jax.local_devices()): pass this process's values "
                f"(its host data, or jax.Arrays on its own devices)")
        if isinstance(x, jax.Array):
            if x.is_deleted():
                raise RuntimeError(deleted_message(logical, f"argument {index}"))
            if x.shape != aval.shape or x.dtype != aval.dtype:
                raise TypeError(f"argument {index} of shape {x.shape} and dtype {x.dtype} does not match the "
                                f"compiled {aval.str_short()}")
            if x.sharding == sharding or x.sharding.is_equivalent_to(sharding, x.ndim):
                return x  # same pieces on the same devices, in the same order
            return jax.device_put(x, sharding)  # also from another platform's devices, as jax.pmap's inputs
        host = np.asarray(x, dtype=aval.dtype)
        if host.shape != aval.shape:
            raise TypeError(f"argument {index} of shape {host.shape} does not match the compiled {aval.str_short()}")
        return put_pieces(host, self._pieces[index], aval, sharding, self.devices)

    def __call__(self, flat_args: Sequence) -> list:
        refuse_inside_callback(self.what)
        if self.too_big is not None:
            raise ResourceExhaustedError(self.too_big)
        if len(flat_args) != len(self.in_avals):
            raise TypeError(f"expected {len(self.in_avals)} array arguments, got {len(flat_args)}")
        exclusive = bool(self._donated_args)  # a donating launch deletes buffers: nobody else may launch then
        took = LAUNCHES.acquire(exclusive)
        try:
            if self._donated_args:
                check_donations(flat_args, self.donated, lambda i: f"argument {i}")
            # Multi-process: agree before placing, since placing a global array may itself run a
            # collective (jax's resharding) that a process launching another program would never meet.
            launch = functools.partial(self._place_and_execute, flat_args)
            results = self.agreement(launch) if self.agreement is not None else launch()
        finally:
            if took:
                LAUNCHES.release(exclusive)
        outs = results.consume_with_handlers(self._handlers)
        token = results.consume_token()
        if self.callbacks is not None:
            set_runtime_tokens(self._callback_devices, token)
            token.block_until_ready()  # a callback's exception is the call's
            self.callbacks.raise_pending()
        if self.windowed:
            remember_launch(token)
        return outs

    def _place_and_execute(self, flat_args: Sequence):
        return self.xla.execute_sharded([self.place(x, i) for i, x in enumerate(flat_args)], with_tokens=True)

    # -- introspection -------------------------------------------------------------
    def hlo_text(self) -> str:
        return "\n\n".join(m.to_string() for m in self.xla.hlo_modules())

    def cost_analysis(self):
        return self.xla.cost_analysis()


def _check_type(x, aval, index: int, shape: bool = True) -> None:
    """``x`` has ``aval``'s dtype (and shape: a share's is checked where it is placed)."""
    if getattr(x, "dtype", None) != aval.dtype or (shape and tuple(getattr(x, "shape", ())) != aval.shape):
        raise TypeError(f"argument {index} of shape {getattr(x, 'shape', None)} and dtype {getattr(x, 'dtype', None)} "
                        f"does not match the compiled {aval.str_short()}")


def device_shapes(avals: Sequence, shardings: Sequence) -> list:
    """The (shape, dtype) of each value's buffer on one device, as XLA compiles
    it; None for a value with no elements (XLA may fold it to another shape)
    or whose sharding XLA decides (a module read from text: pxla_mlir.stages.text_module)."""
    out = []
    for aval, sharding in zip(avals, shardings if shardings is not None else [None] * len(avals)):
        if sharding is None:
            out.append(None)
            continue
        aval, sharding = physical(aval, sharding)
        out.append(None if 0 in aval.shape else (tuple(sharding.shard_shape(aval.shape)), np.dtype(aval.dtype)))
    return out


def map_description(name: str | None) -> str:
    """``pmap 'step'``: the kind and name of a map from its final module's ``sym_name`` (``<kind>_<name>``;
    None, "module": a module read from text may have no name)."""
    if name is None:
        return "module"
    kind, _, rest = name.partition("_")
    return f"{kind} {rest!r}" if rest else repr(name)
