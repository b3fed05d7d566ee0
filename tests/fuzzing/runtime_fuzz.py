"""Seeded scenarios against the runtime: the C++ fast path and the persistent cache.

Each case is one random scenario in a process of its own (a crash or hang
fails that case only):

* even cases, **dispatch**: a pool of arrays (host numpy, pmap outputs,
  arrays laid out by jax in other device orders, replicated, on one device)
  goes through random steps: calls of a plain, a pytree and a donating pmap
  (repeated, so the C++ path runs them), donation by ``jax.jit``, deletion,
  writes to host inputs right after a call, and a call in another thread
  while this one deletes its argument or calls too. Every call must give the
  numbers of the NumPy mirror of the pool, or jax's ``Array has been
  deleted`` RuntimeError exactly when its argument is gone (in a race:
  either).
* odd cases, **cache**: programs of one signature (``x * k`` for several
  ``k``, on two shapes) are compiled through a fresh persistent cache while
  random damage is done to its entries between runs (entries swapped,
  copied from another shape, bytes flipped inside valid compression, in the
  compressed bytes or the header, truncated, replaced by noise, a forged
  header over an executable of other shapes). Every run must give its own
  program's numbers.

    python tests/fuzzing/runtime_fuzz.py --cases 200 --seed 1    # what `make fuzz` runs
    python tests/fuzzing/runtime_fuzz.py --show 1:4               # one case in this process, with its steps
"""

from __future__ import annotations

import pathlib
import random
import sys
import traceback

if __package__ in (None, ""):  # run as a script: make `fuzzing` importable
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from fuzzing import workers

ENV = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
STEPS = 24


class Mismatch(AssertionError):
    pass


# -- dispatch ---------------------------------------------------------------------------------

def dispatch_scenario(rng: random.Random, log: list[str]) -> None:
    import threading

    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    import pxla_mlir

    devices = jax.devices()
    mode = rng.choice(["replica", "partition"])
    scale = pxla_mlir.pmap(lambda v: v * 2.0 + 1.0, "i", mode=mode)
    tree = pxla_mlir.pmap(lambda t: t["a"] - t["b"], "i", mode=mode)
    donor = pxla_mlir.pmap(lambda v: v + 0.5, "i", donate_argnums=0, mode=mode)
    jit_donor = jax.jit(lambda v: v + 0.25, donate_argnums=0)
    pool: list[list] = []  # [array, numpy value or None (gone)]

    def fresh():
        value = np.asarray(np.random.default_rng(rng.randrange(2**31)).normal(size=(8, 5)), np.float32)
        how = rng.choice(["host", "pmap", "reversed", "replicated", "one device"])
        if how == "host":
            x = value.copy()
        elif how == "pmap":
            x, value = scale(value), value * 2 + 1
        else:
            order = devices[::-1] if how == "reversed" else devices
            mesh = Mesh(np.array(order), ("d",))
            x = jax.device_put(value, NamedSharding(mesh, P("d") if how != "replicated" else P())) \
                if how != "one device" else jax.device_put(value, devices[rng.randrange(8)])
        pool.append([x, np.asarray(value)])
        log.append(f"new #{len(pool) - 1} ({how})")
        return len(pool) - 1

    def expect(call, want, what, racing=False):
        try:
            got = np.asarray(call())
        except RuntimeError as e:
            if want is not None and not racing:
                raise Mismatch(f"{what}: raised {str(e)[:90]!r} on a live argument") from None
            if not str(e).startswith("Array has been deleted"):
                raise Mismatch(f"{what}: unexpected RuntimeError {str(e)[:120]!r}") from None
            return "refused"
        if want is None:
            raise Mismatch(f"{what}: ran on a deleted argument")
        if not np.array_equal(got, want):
            raise Mismatch(f"{what}: wrong numbers (max error {float(np.max(np.abs(got - want))):.3g})")
        return "ok"

    for _ in range(3):
        fresh()
    for step in range(STEPS):
        i = rng.randrange(len(pool)) if rng.random() < 0.8 else fresh()
        x, value = pool[i]
        action = rng.choice(["call", "call", "call", "tree", "donate", "jit donate", "delete", "write after",
                             "race delete", "race call"])
        log.append(f"step {step}: {action} #{i}")
        if action == "call":
            for _ in range(rng.randint(1, 3)):
                expect(lambda: scale(x), None if value is None else value * 2 + 1, f"scale(#{i})")
        elif action == "tree":
            j = rng.randrange(len(pool))
            other = pool[j][1]
            want = None if value is None or other is None else value - other
            expect(lambda: tree({"a": x, "b": pool[j][0]}), want, f"tree(#{i}, #{j})")
        elif action in ("donate", "jit donate"):
            fn, add = (donor, 0.5) if action == "donate" else (jit_donor, 0.25)
            if isinstance(x, np.ndarray) or (action == "jit donate" and (value is None or rng.random() < 0.3)):
                continue  # host values are not donated; jax.jit itself crashes on a deleted array; some stay live
            expect(lambda: fn(x), None if value is None else value + np.float32(add), f"{action}(#{i})")
            if x.is_deleted():  # an array laid out otherwise is moved first: the donated copy is the moved one
                pool[i][1] = None
        elif action == "delete":
            if not isinstance(x, np.ndarray):
                x.delete()
                pool[i][1] = None
        elif action == "write after":
            if isinstance(x, np.ndarray):
                y = scale(x)
                x[...] = -7.0  # at once: the launch must have its own copy
                got = np.asarray(y)
                if not np.array_equal(got, value * 2 + 1):
                    raise Mismatch(f"write after scale(#{i}): the launch saw the write")
                pool[i][1] = x.copy()
            else:
                expect(lambda: scale(x), None if value is None else value * 2 + 1, f"scale(#{i})")
        else:  # another thread calls while this one deletes or calls
            outcome: list = []
            want = None if value is None else value * 2 + 1

            def other():
                try:
                    outcome.append(expect(lambda: scale(x), want, f"thread scale(#{i})", racing=True))
                except BaseException as e:  # reported by the main thread
                    outcome.append(e)

            thread = threading.Thread(target=other)
            thread.start()
            if action == "race delete" and not isinstance(x, np.ndarray):
                x.delete()
                pool[i][1] = None
            else:
                expect(lambda: scale(x), want, f"scale(#{i}) beside a thread")
            thread.join(120)
            if thread.is_alive():
                raise Mismatch(f"{action} #{i}: the other thread hangs")
            if isinstance(outcome[0], BaseException):
                raise outcome[0]
    jax.effects_barrier()


# -- cache ------------------------------------------------------------------------------------

def cache_scenario(rng: random.Random, log: list[str]) -> None:
    import glob
    import hashlib
    import os
    import shutil
    import tempfile
    import warnings
    import zlib

    import numpy as np

    import pxla_mlir
    from pxla_mlir.runtime import persistent_cache as pc

    root = tempfile.mkdtemp(prefix="pxla-cache-fuzz-")
    pxla_mlir.enable_compilation_cache(root)
    programs = [(k, cols) for k in (2.0, 3.0, 5.0) for cols in (3, 4)]
    entries: dict = {}  # program -> its entry file, once written

    def executable_entries() -> set:  # the executables' entries (each lowering's is beside its executable's)
        return {p for p in glob.glob(os.path.join(root, "pxla-*-cache"))
                if not os.path.basename(p).startswith("pxla-lowering-")}

    def run(program):
        k, cols = program
        x = np.arange(8 * cols, dtype=np.float32).reshape(8, cols)
        before = executable_entries()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pc.CacheEntryRejected)
            got = np.asarray(pxla_mlir.pmap(lambda v: v * k, "i")(x))  # a new pmap: compiled or loaded anew
        if not np.array_equal(got, x * k):
            raise Mismatch(f"x * {k} on {x.shape} gave other numbers (another program ran)")
        new = executable_entries() - before
        if new:
            entries[program] = new.pop()

    SEAL = pc.EXECUTABLES.seal_struct()

    def damage(path, how, other):
        raw = pathlib.Path(path).read_bytes()
        head, body = raw[:SEAL.size], raw[SEAL.size:]
        if how == "swap" and other:
            shutil.copy(other, path)
        elif how == "flip inside":
            payload = bytearray(zlib.decompress(body))
            for _ in range(rng.randint(1, 64)):
                payload[rng.randrange(len(payload))] ^= 1 << rng.randrange(8)
            pathlib.Path(path).write_bytes(head + zlib.compress(bytes(payload)))
        elif how == "flip compressed":
            data = bytearray(raw)
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(SEAL.size, len(data))] ^= 1 << rng.randrange(8)
            pathlib.Path(path).write_bytes(bytes(data))
        elif how == "flip header":
            data = bytearray(raw)
            data[rng.randrange(SEAL.size)] ^= 1 << rng.randrange(8)
            pathlib.Path(path).write_bytes(bytes(data))
        elif how == "truncate":
            pathlib.Path(path).write_bytes(raw[:rng.randrange(len(raw))])
        elif how == "noise":
            pathlib.Path(path).write_bytes(bytes(rng.randrange(256) for _ in range(rng.randint(0, 4096))))
        elif how == "forge" and other:
            magic, program, _, seconds = SEAL.unpack(head)
            theirs = pathlib.Path(other).read_bytes()[SEAL.size:]  # its stored bytes, with a checksum that agrees
            pathlib.Path(path).write_bytes(SEAL.pack(magic, program, hashlib.sha256(theirs).digest(), seconds)
                                           + theirs)

    try:
        for step in range(STEPS // 2):
            program = rng.choice(programs)
            if entries and rng.random() < 0.6:
                victim = rng.choice(sorted(entries))
                how = rng.choice(["swap", "flip inside", "flip compressed", "flip header", "truncate", "noise",
                                  "forge"])
                # A forged entry has the victim's program digest and a checksum that fits its payload: only
                # one compiled for other shapes can be told apart (rewriting both digests on purpose over
                # another program of the same shapes is not detectable without compiling).
                others = [p for q, p in entries.items() if q != victim and os.path.exists(p)
                          and (how != "forge" or q[1] != victim[1])]
                if os.path.exists(entries[victim]):
                    damage(entries[victim], how, rng.choice(others) if others else None)
                    log.append(f"step {step}: {how} the entry of x * {victim[0]} on {victim[1]} columns")
                    program = victim
            log.append(f"step {step}: run x * {program[0]} on {program[1]} columns")
            run(program)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def check(seed: int, index: int) -> tuple[str, str | None, str]:
    """One scenario (see workers.py): 'dispatch' or 'cache', or what went wrong."""
    kind = ("dispatch", "cache")[index % 2]
    rng = random.Random(f"{seed}:{index}")
    log: list[str] = []
    try:
        (dispatch_scenario if kind == "dispatch" else cache_scenario)(rng, log)
    except Mismatch as e:
        return "", f"{kind}: {e}", "\n".join(log[-12:])
    except Exception as e:
        return "", f"{kind} failed: {type(e).__name__}: {e}", "\n".join(log[-12:]) + "\n" + traceback.format_exc(limit=-4)
    return kind, None, "\n".join(log)


def run(seed: int, count: int, *, workers_count: int = 2) -> workers.Report:
    """``count`` scenarios, each in a fresh process (batch=1)."""
    return workers.run("fuzzing.runtime_fuzz", seed, list(range(count)), workers=workers_count, timeout=240, env=ENV,
                       batch=1)


def main(argv=None) -> int:
    return workers.seeded_main(argv, doc=__doc__, title="runtime scenarios (fast path, cache)", count_flag="cases",
                               default_count=200, show_help="run one case in this process and print its steps",
                               check=check, run=run, env=ENV)

if __name__ == "__main__":
    sys.exit(main())
