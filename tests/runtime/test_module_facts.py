"""What compiling reads of a final module (runtime/module_facts.py): read
once from the module, kept in the lowering cache, and enough on their own to
refuse a module or to load its executable without parsing it."""

import dataclasses
import hashlib

import jax
import numpy as np
import pytest
from jax import lax

import pxla_mlir
from pxla_mlir.jaxbridge import cache_access
from pxla_mlir.runtime.compile import KnownCrashError, ReplicaShardingError, compile_program
from pxla_mlir.runtime.executable import map_description
from pxla_mlir.runtime.module_facts import KNOWN_CRASH, REPLICA_SHARDING, ModuleFacts, ModuleToCompile

X = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)


def lowered(**options):
    return pxla_mlir.pmap(lambda v: lax.psum(v * 2, "i"), "i", **options).lower(X)


def facts_of(lowering) -> ModuleFacts:
    return ModuleToCompile(lowering.mhlo()).facts


@pytest.mark.parametrize("mode", ["replica", "partition"])
def test_facts_are_the_modules_and_survive_a_round_trip(mode):
    low = lowered(mode=mode)
    facts = facts_of(low)
    assert facts.name == "pmap__lambda"
    assert facts.digest == hashlib.sha256(low.as_text().encode()).digest()
    assert (facts.replicas, facts.partitions) == ((8, 1) if mode == "replica" else (1, 8))
    assert facts.refusal is None
    assert ModuleFacts.from_json(facts.to_json()) == facts
    assert ModuleFacts.from_json({**facts.to_json(), "name": None}).name is None  # a module without sym_name


@pytest.mark.parametrize("broken", [{"digest": "00"}, {"replicas": 0}, {"refusal": 3}, {"name": None, "digest": 1}])
def test_facts_that_are_not_a_modules_do_not_read(broken):
    data = {**facts_of(lowered()).to_json(), **broken}
    with pytest.raises((ValueError, TypeError, KeyError)):
        ModuleFacts.from_json(data)


def never_parsed():
    pytest.fail("the module was parsed")


@pytest.mark.parametrize("kind, error", [(REPLICA_SHARDING, ReplicaShardingError), (KNOWN_CRASH, KnownCrashError)])
def test_a_refusal_in_the_facts_is_raised_without_the_module(kind, error):
    facts = dataclasses.replace(facts_of(lowered()), refusal=(kind, "it would abort the process"))
    with pytest.raises(error, match="cannot compile the module: it would abort the process"):
        compile_program(ModuleToCompile(never_parsed, facts), jax.devices()[:8])


def test_device_counts_come_from_the_facts():
    facts = facts_of(lowered())
    with pytest.raises(ValueError, match=r"the module needs 8 devices \(num_replicas = 8, num_partitions = 1\), got 4"):
        compile_program(ModuleToCompile(never_parsed, facts), jax.devices()[:4])


def test_an_executable_shared_in_the_process_is_found_from_the_facts_alone():
    low = lowered()
    first = compile_program(ModuleToCompile(low.mhlo()), low.devices, share=True)
    again = compile_program(ModuleToCompile(never_parsed, facts_of(low)), low.devices, share=True)
    assert again is first


def test_the_executable_key_holds_the_program_the_options_and_the_devices():
    low = lowered()
    facts = facts_of(low)
    devices = list(low.devices)
    ids = np.array([d.id for d in devices]).reshape(8, 1)
    from pxla_mlir.runtime.compile import compile_options

    def key(facts=facts, devices=devices, overrides=None):
        opts = compile_options(8, 1, np.array([d.id for d in devices]).reshape(8, 1), overrides=overrides)
        return cache_access.cache_key(facts.name, facts.digest, devices, ids, opts)

    base = key()
    assert base.startswith("pmap__lambda-") and base == key()
    assert key(facts=dataclasses.replace(facts, digest=hashlib.sha256(b"other").digest())) != base
    assert key(devices=devices[::-1]) != base
    assert key(overrides={"xla_cpu_enable_fast_math": True}) != base


def test_a_description_tells_an_unnamed_module_from_one_named_module():
    assert map_description(None) == "module"
    assert map_description("module") == "'module'"
    assert map_description("pmap_step") == "pmap 'step'"


def test_a_multi_process_agreement_reads_the_facts_and_prints_only_for_a_mismatch():
    from pxla_mlir.distributed.program_check import LaunchAgreement

    x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    cold = pxla_mlir.pmap(lambda v: lax.psum(v * 5, "i"), "i").lower(x)
    warm = pxla_mlir.pmap(lambda v: lax.psum(v * 5, "i"), "i").lower(x)  # an equal program: from the lowering cache
    agreements = [LaunchAgreement(low) for low in (cold, warm)]
    assert warm._lowering._to_compile._parsed is None, "the agreement parsed the module"
    assert agreements[0].fingerprint == agreements[1].fingerprint
    assert agreements[1].sha256 == hashlib.sha256(cold.as_text().encode()).hexdigest()
    assert agreements[1].record["text"] == cold.as_text()  # a mismatch's record: printed then


DEADLOCK = """
    import threading, time
    import numpy as np, pxla_mlir
    from jax import lax
    from pxla_mlir.jaxbridge.stablehlo_lowering import LOWERING_LOCK
    from pxla_mlir.runtime.module_facts import ModuleToCompile

    x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    pxla_mlir.pmap(lambda v: lax.psum(v * 3, "i"), "i").lower(x)
    warm = pxla_mlir.pmap(lambda v: lax.psum(v * 3, "i"), "i").lower(x)  # from the lowering cache: not parsed
    fresh = ModuleToCompile(pxla_mlir.pmap(lambda v: v + 1, "i").lower(x).mhlo())  # facts not read yet
    release = threading.Event()

    def inside_a_lowering():
        with LOWERING_LOCK:
            release.wait()

    threads = [threading.Thread(target=t, daemon=True)
               for t in (inside_a_lowering, lambda: fresh.facts, lambda: warm.as_text())]
    for t in threads:
        t.start()
        time.sleep(0.2)
    release.set()
    for t in threads:
        t.join(20)
    print("stuck" if any(t.is_alive() for t in threads) else "done")
"""


@pytest.mark.subprocess
def test_reading_facts_and_parsing_from_threads_never_deadlock():
    """Facts of one module and the parse of another, asked from two threads while a third holds the lowering
    lock: each waits for that lock first (on Python 3.11 functools.cached_property's lock, shared by every
    instance, was taken first by one and second by the other)."""
    from isolation import run_isolated

    assert run_isolated(DEADLOCK, timeout=120).strip() == "done"


def test_a_module_rewritten_in_place_compiles_as_it_is_then():
    """``mhlo()`` is the module itself: an edit made after lowering (or after a first compile) is what the next
    compile runs, under a key of its own text, never the facts read before the edit."""
    from jaxlib.mlir import ir

    x = np.ones((8, 4), np.float32)
    lowered = pxla_mlir.pmap(lambda v: v * 2.0, "i").lower(x)

    def set_constant(value):
        module = lowered.mhlo()
        with module.context:
            main = next(op for op in module.body.operations if op.operation.name == "func.func")
            for op in main.regions[0].blocks[0].operations:
                if op.operation.name == "mhlo.constant":
                    op.attributes["value"] = ir.DenseElementsAttr.get(np.full(op.result.type.shape, value, np.float32),
                                                                      type=op.result.type)

    set_constant(3.0)
    np.testing.assert_array_equal(np.asarray(lowered.compile({"xla_cpu_enable_fast_math": False})(x)), x * 3)
    set_constant(5.0)
    np.testing.assert_array_equal(np.asarray(lowered.compile({"xla_cpu_enable_fast_math": True})(x)), x * 5)
