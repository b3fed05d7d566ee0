"""No launch or read ever sees a deleted buffer: launches run inside a lock that deletion and donation take alone.

jaxlib 0.10.2 crashes the process (SIGSEGV in ``ExecuteLaunch``) when a
multi-device launch gets an array whose buffers are gone: one donated to an
earlier call (of any map, or of jax.jit), or deleted or donated by another
thread while the launch is being prepared. jaxlib's C++ dispatch checks
neither. So every launch, on the Python and the C++ path, runs inside
:data:`LAUNCHES`, and one over several devices checks its arguments there
(:func:`check_live`). A launch on one device is not checked first: jaxlib
refuses a deleted buffer there with an error, after which its arguments are
checked to name the one refused (:mod:`.dispatch`).

Whatever deletes buffers holds the lock alone: ``jax.Array.delete()``, and
every launch that donates, on one device too (it consumes the piece on its
device of an array that may span several, or an array another thread is
passing to a multi-device launch or reading). Reads of an array's values
(``np.asarray`` and everything built on jax's ``_value``, ``jax.device_get``)
hold it shared. jaxlib's methods are wrapped once, when this module is
imported. A check and the use that follows it therefore see the same arrays,
and a read sees its array whole or raises jax's "Array has been deleted".
A donating launch alone in the process takes the lock as cheaply as a shared
launch does (:meth:`LaunchLock.acquire`).

What this cannot cover: jax.jit donating an array in another thread while a
map launches with it, or a map donating one that jax's own dispatch is
launching (jax.jit, jnp operations; it crashes there by itself).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time

from jax import tree_util

from pxla_mlir.jaxbridge.jax_internals import ArrayImpl
from pxla_mlir.runtime.callbacks import inside_callback

__all__ = ["LAUNCHES", "LaunchLock", "check_live", "deleted_message"]


#: Seconds an exclusive taker waits for the shared holders, while a thread is away in a cache miss, before it
#: lets new shared takers in (see LaunchLock), and for how long. A shared hold is one launch's dispatch.
PATIENCE, OPEN_FOR = 0.02, 0.001


class _Mode(threading.local):
    mode: bool | None = None  # this thread holds the lock: False shared, True exclusive; None not
    alone: bool = False  # its exclusive hold was taken the quick way (see LaunchLock.acquire)


#: The ``closed`` entry of an exclusive holder that took the lock the quick way.
_ALONE = object()


class LaunchLock:
    """Shared by launches and reads; taken alone by deletions and donating launches.

    Re-entrant per thread (a launch's Python path nests inside its C++ call;
    tracing may run other maps). Exclusive takers take turns; the one whose
    turn it is keeps new shared takers out while it waits for the holders to
    leave, so a deletion is not starved by a stream of launches. One
    exception: while a thread that let go for a cache miss (:meth:`released`)
    has yet to take the lock again, a holder may be waiting for it (jaxlib's
    C++ dispatch makes a call of a signature wait for that signature's miss).
    After :data:`PATIENCE` the exclusive taker then lets shared takers in for
    a moment (:meth:`_let_shared_in`).

    Taking it shared is a few C-level list operations and no mutex, so the
    cached call does it inline (:func:`.dispatch.launch_cached`): append to
    :attr:`holders`, then look at :attr:`closed` (an exclusive taker appends
    to ``closed``, then waits until ``holders`` is empty). Under the GIL the
    two orders cannot both miss each other: either the shared taker sees
    ``closed`` and backs off, or the exclusive one sees it in ``holders``.
    Shared holders do not notify anyone when they let go; an exclusive taker
    polls ``holders`` (held for one launch's dispatch, microseconds).

    An exclusive taker that finds the lock free (a training loop's donating
    step, alone in the process) takes it the same way, without the mutex:
    it appends to ``holders`` and to ``closed``, and holds the lock if both
    hold its entry alone; otherwise it backs off and takes its turn. A shared
    taker that backed off sleeps on the condition, and counts itself in
    :attr:`sleepers` first, so such a holder wakes it only when someone sleeps.
    """

    def __init__(self):
        self.holders: list = []  # one entry per shared holder, and the quick exclusive holder's
        self.closed: list = []  # the exclusive taker's entry, while it waits for holders to leave or holds
        self.away: list = []  # one entry per thread inside released(), which takes the lock again after it
        self.sleepers: list = []  # one entry per shared taker waiting on the condition for `closed` to empty
        self.local = _Mode()
        # `with self._mutex` (C-level enter and exit: no interrupt point between taking it and the block)
        self._mutex = threading.Lock()
        self._cond = threading.Condition(self._mutex)
        self._exclusive = False

    def acquire(self, exclusive: bool = False) -> bool:
        """Takes the lock; False (and nothing to release) if this thread holds it already."""
        local = self.local
        if local.mode is not None:
            return False
        if exclusive:
            if self._take_alone():
                local.alone = True
            else:
                self._take_turn()
        else:
            while True:
                self.holders.append(True)
                if not self.closed:
                    break
                self.holders.pop()
                with self._mutex:
                    self.sleepers.append(True)  # before looking at `closed`: see _leave_alone
                    try:
                        while self.closed:
                            self._cond.wait()
                    finally:
                        self.sleepers.pop()
        local.mode = exclusive
        return True

    def _take_alone(self) -> bool:
        """Takes the lock exclusively if nobody else holds it or waits for it,
        with two appends and a look (the cost of a shared hold)."""
        holders, closed = self.holders, self.closed
        try:
            holders.append(True)  # a turn-taking exclusive taker waits for this entry to leave
            closed.append(_ALONE)  # shared takers back off from now on
            if len(closed) == 1 and len(holders) == 1:
                return True
        except BaseException:  # an interrupt must not leave the lock closed
            self._leave_alone()
            raise
        self._leave_alone()
        return False

    def _leave_alone(self) -> None:
        """Takes back what :meth:`_take_alone` appended, and wakes the shared
        takers that saw its entry in ``closed``."""
        # (try, not contextlib.suppress, which costs a donating step half a microsecond)
        try:  # noqa: SIM105
            self.closed.remove(_ALONE)
        except ValueError:  # a turn's release cleared `closed`, or an interrupt came before the append
            pass
        try:  # noqa: SIM105
            self.holders.pop()
        except IndexError:  # an interrupt before the append
            pass
        if self.sleepers:  # a sleeper counted itself before it looked at `closed`: it is woken, or saw it open
            with self._mutex:
                self._cond.notify_all()

    def _take_turn(self) -> None:
        """Takes the lock exclusively, in turn with the other exclusive takers."""
        token, mine = object(), False
        try:
            with self._mutex:
                while self._exclusive:
                    self._cond.wait()
                self._exclusive = mine = True
                self.closed.append(token)
            delay, waited = 1e-6, 0.0
            while self.holders:
                if waited >= PATIENCE and self.away:  # a holder may wait for a thread that is away
                    self._let_shared_in(token)
                    waited = 0.0
                time.sleep(delay)
                waited += delay
                delay = min(2 * delay, 1e-3)
        except BaseException:  # an interrupt while waiting must not leave the lock closed
            with self._mutex:
                if token in self.closed:
                    self.closed.remove(token)
                if mine:
                    self._exclusive = False
                self._cond.notify_all()
            raise

    def _let_shared_in(self, token) -> None:
        """Opens the lock to shared takers for a moment, then closes it again.

        A shared holder can be waiting for a thread that waits to take the
        lock shared: jaxlib's C++ dispatch makes a call wait for the cache
        miss of its signature in another thread, whose launch then needs the
        lock. Keeping new shared takers out for good would then deadlock.
        """
        with self._mutex:
            self.closed.remove(token)
            self._cond.notify_all()
        time.sleep(OPEN_FOR)
        with self._mutex:
            self.closed.append(token)

    def release(self, exclusive: bool = False) -> None:
        local = self.local
        if local.mode is None:  # a re-acquire in released() was interrupted: nothing of ours is held
            return
        local.mode = None
        if exclusive and local.alone:
            local.alone = False
            self._leave_alone()
        elif exclusive:
            with self._mutex:
                self._exclusive = False
                self.closed.clear()  # only the holder's entry: queued exclusive takers add theirs on their turn
                self._cond.notify_all()
        else:
            self.holders.pop()

    @contextlib.contextmanager
    def released(self):
        """Lets go of the lock this thread holds for the block (tracing and
        compiling on a cache miss need not keep deletions waiting)."""
        mode = self.local.mode
        if mode is None:
            yield
            return
        self.release(mode)
        token = object()
        try:
            self.away.append(token)
            yield
        finally:
            try:
                self.acquire(mode)
            finally:
                with contextlib.suppress(ValueError):  # (an interrupt before the append)
                    self.away.remove(token)


_is_deleted = ArrayImpl.is_deleted

#: The lock of every launch and every ``jax.Array.delete()``.
LAUNCHES = LaunchLock()


def _guard_delete(delete):
    def guarded_delete(self):
        if inside_callback() is not None:  # its launch holds the lock and waits for this callback
            return delete(self)
        took = LAUNCHES.acquire(exclusive=True)
        try:
            return delete(self)
        finally:
            if took:
                LAUNCHES.release(exclusive=True)

    guarded_delete.__doc__ = delete.__doc__
    return guarded_delete


def _guard_read(read, *, wait_first: bool):
    """A read of an array's buffers (``np.asarray``, ``.tolist()``, ``float()``, ...) holds the lock shared: a
    donating launch in another thread then deletes them before the read (jax's "Array has been deleted") or after
    it, never in the middle (a raw XLA error, or a crash). ``wait_first``: the read waits for the array to be
    computed, which it does before taking the lock, so that deletions and donations do not wait for the devices."""
    def guarded_read(self, *args, **kwargs):
        if inside_callback() is not None:  # its launch holds the lock and waits for this callback
            return read(self, *args, **kwargs)
        if wait_first:
            try:  # noqa: SIM105 (contextlib.suppress would cost every read half a microsecond)
                self.block_until_ready()
            except RuntimeError:  # XLA's words for a buffer donated meanwhile: the read below raises jax's
                pass
        took = LAUNCHES.acquire()
        try:
            return read(self, *args, **kwargs)
        finally:
            if took:
                LAUNCHES.release()

    guarded_read.__doc__ = read.__doc__
    return guarded_read


def wrap_array_method(name: str, wrap) -> None:
    """Replaces jaxlib's ``ArrayImpl.<name>`` (a method or a property) with
    ``wrap(original)``, once per process."""
    original = getattr(ArrayImpl, name)
    getter = original.fget if isinstance(original, property) else original
    if getattr(getter, "_pxla_wrapped", False):
        return
    wrapped = wrap(getter)
    wrapped._pxla_wrapped = True
    setattr(ArrayImpl, name, property(wrapped, doc=original.__doc__) if isinstance(original, property) else wrapped)


wrap_array_method("delete", _guard_delete)
wrap_array_method("_value", functools.partial(_guard_read, wait_first=True))  # np.asarray, tolist, float, repr, ...
wrap_array_method("copy_to_host_async", functools.partial(_guard_read, wait_first=False))  # jax.device_get


def deleted_message(aval, where: str) -> str:
    return (f"Array has been deleted with shape={aval.str_short()}: {where} was donated to an earlier call "
            f"(donate_argnums) or deleted; pass a live array (a donated array cannot be used again)")


def check_live(args: tuple, kwargs: dict, leaves: list | None = None) -> None:
    """Raises jax's RuntimeError if an argument leaf is a deleted (or donated)
    jax.Array; ``leaves``: the arguments' leaves, when the caller has them."""
    if leaves is None:
        leaves = tree_util.tree_leaves((args, kwargs))
    try:  # one C-level pass when every leaf is a jax.Array (the cached call of a training loop)
        if not any(map(_is_deleted, leaves)):
            return
    except TypeError:  # some leaf is not a jax.Array (numpy, a scalar)
        if not any(map(_is_deleted, [x for x in leaves if type(x) is ArrayImpl])):
            return
    for i, arg in enumerate(args):
        _raise_if_deleted(arg, f"argument {i}")
    for key, value in kwargs.items():
        _raise_if_deleted(value, f"argument {key!r}")


def _raise_if_deleted(tree, where: str) -> None:
    for path, x in tree_util.tree_flatten_with_path(tree)[0]:
        if type(x) is ArrayImpl and x.is_deleted():
            raise RuntimeError(deleted_message(x.aval, where + tree_util.keystr(path)))
