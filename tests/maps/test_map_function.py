"""The one map front end (pxla_mlir.maps.function.MapFunction) every map is
built on: cache keys with static argument types and jax's trace context, one
trace under concurrent first calls, the C++ fast path for xmap that follows
the mesh in scope, and thread-safe bounded caches."""

import contextlib
import gc
import threading

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CPP_LOWERING, assembles_results
from jax import lax

import pxla_mlir
from pxla_mlir.maps import function
from pxla_mlir.maps.arguments import static_key
from pxla_mlir.mlir.support.lru import LRU, clear_all
from pxla_mlir.mlir.support.stats import STATS

X = np.ones(8, np.int32)


@pytest.mark.parametrize("kind", ["pmap", "jit"])
@pytest.mark.parametrize("statics", [[1, 1.0, True, 1, 1.0], [(1,), (1.0,), (True,), (1,), (1.0,)],
                                     [(("s", 1),), (("s", 1.0),), (("s", 1),)]], ids=["scalars", "tuples", "nested"])
def test_static_arguments_are_keyed_by_type_as_jax_keys_them(kind, statics):
    """1, 1.0 and True hash and compare equal but trace to other dtypes (jax.pmap too: int32 for 1,
    float32 for 1.0); repeated calls take the C++ fast path, which must not confuse them either."""
    def body(x, s):
        value = s if not isinstance(s, tuple) else s[0][1] if isinstance(s[0], tuple) else s[0]
        return x * value

    ours = pxla_mlir.pmap(body, "i", static_broadcasted_argnums=1) if kind == "pmap" else \
        pxla_mlir.jit(body, static_argnums=1)
    got = [ours(X, s).dtype for s in statics]
    # What the body traces to with each static alone (jax.pmap itself reuses the int32 program for (1.0,)
    # after (1,): its C++ cache compares the tuples, not their elements' types).
    want = [jax.eval_shape(lambda x, s=s: body(x, s), X).dtype for s in statics]
    assert got == want


def test_static_key_tells_equal_values_of_other_types_apart():
    assert static_key(1) != static_key(1.0) != static_key(True)
    assert static_key((1, "a")) != static_key((1.0, "a"))
    assert static_key({"a": [1]}) != static_key({"a": [True]})
    assert static_key((1, "a")) == static_key((1, "a"))
    assert hash(static_key({"a": [1]})) == hash(static_key({"a": [1]}))


def test_jax_config_is_part_of_the_key():
    f = pxla_mlir.pmap(lambda v: v * 2, "i")
    assert f(np.arange(8)).dtype == np.int32
    with jax.enable_x64(True):
        assert f(np.arange(8)).dtype == np.int64
    assert f(np.arange(8)).dtype == np.int32


def test_concurrent_first_calls_trace_once():
    traces = []

    def body(v):
        traces.append(1)
        return v + 1

    f = pxla_mlir.pmap(body, "i")
    barrier = threading.Barrier(4)
    outs = []

    def call():
        barrier.wait()
        outs.append(np.asarray(f(X)))

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(traces) == 1 and len(outs) == 4
    assert all((o == 2).all() for o in outs)


def test_xmap_fast_path_follows_the_mesh_in_scope():
    f = pxla_mlir.xmap(lambda v: v * 2, ["b", ...], ["b", ...], axis_resources={"b": "x"}, lowering=CPP_LOWERING)
    x = np.arange(8.0, dtype=np.float32)
    for devices in (8, 4, 8, 2):
        with pxla_mlir.Mesh(np.array(jax.devices()[:devices]), ("x",)):
            for _ in range(3):  # the second and third calls take the C++ path
                y = f(x)
            assert len(y.sharding.device_set) == devices
            np.testing.assert_array_equal(np.asarray(y), x * 2)
    before = STATS["python_calls"]
    with pxla_mlir.Mesh(np.array(jax.devices()[:4]), ("x",)):
        for _ in range(5):
            f(x)
    assert STATS["python_calls"] == before  # cached in C++ for that mesh


def test_xmap_stored_on_a_class_is_not_bound():
    class Model:
        f = pxla_mlir.xmap(lambda v: v * 2, ["b", ...], ["b", ...])

    np.testing.assert_array_equal(np.asarray(Model().f(np.arange(4.0))), np.arange(4.0) * 2)


@pytest.mark.slow
def test_every_cache_of_a_map_is_bounded(monkeypatch):
    """Beyond its size a map drops its least recently used signature everywhere, the C++ fast path
    included: an executable dropped from the map's caches is freed (a C++ cache shared by every map,
    4,096 signatures, kept ~200 KiB of each alive). Size 4 here; maps have 64."""
    monkeypatch.setattr(function, "CACHE_SIZE", 4)
    f = pxla_mlir.pmap(lambda v: jnp.sum(v), "i")
    f._cache = function.CallCache(4)
    client = jax.devices()[0].client
    gc.collect()
    before = len(client.live_executables())
    for n in range(1, 4 + 6):
        x = np.ones((8, n), np.float32)
        f(x)
        f(x)  # the C++ fast path keeps this signature
    gc.collect()
    assert len(f._cache.compiled) == 4 and len(f._cache.traced) == 4 and len(f._cache.lowered) == 4
    assert f._entry.dispatchers.get(f._environment())._cpp._cache_size() == 4
    # At most 4 more than before (unbounded: 9); other tests' programs may be freed meanwhile.
    assert len(client.live_executables()) - before <= 4


def test_lru_is_thread_safe():
    cache = LRU(4)
    errors = []

    def hammer(offset):
        try:
            for i in range(20000):
                cache[(i + offset) % 6] = i
                cache.get((i + offset + 1) % 6)
        except Exception as e:  # an eviction between a lookup's steps
            errors.append(e)

    threads = [threading.Thread(target=hammer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(cache) <= 4


# -- caches shared by every object of one function and options, weakly keyed ---------------------------------

def _counts():
    return {k: STATS[k] for k in ("traces", "compiles", "python_calls")}


def _counts_after(calls, mapped, *args):
    """The counts expected after ``calls`` more cached calls of ``mapped`` on ``args``: no trace or compile, and
    no Python call unless its program assembles its results (then every call takes the Python path)."""
    python = calls if assembles_results(mapped, *args) else 0  # (lowered and compiled before the counts are read)
    counts = _counts()
    return {**counts, "python_calls": counts["python_calls"] + python}


def _psum_body(v):
    return lax.psum(v, "i") * 2


@pytest.mark.parametrize("make", [
    lambda: pxla_mlir.pmap(_psum_body, "i"),
    lambda: pxla_mlir.pmap(_psum_body, "i", in_axes=[0]),  # a prefix that cannot be hashed
    lambda: pxla_mlir.jit(_jit_body),
    lambda: pxla_mlir.xmap(_xmap_body, ["b", ...], ["b", ...]),
], ids=["pmap", "pmap list axes", "jit", "xmap"])
def test_a_new_object_of_the_same_function_and_options_reuses_everything(make):
    x = np.arange(8.0, dtype=np.float32)
    first = make()
    want = np.asarray(first(x))
    expected = _counts_after(3, first, x)
    for _ in range(3):
        np.testing.assert_array_equal(make()(x), want)
    # No trace, compile or Python call (but where the program assembles its results): the new objects share
    # the C++ dispatcher too.
    assert _counts() == expected


def _jit_body(v):
    return pxla_mlir.pmap(_psum_body, "i")(v) + 1


def _xmap_body(v):
    return v * 3



def test_unnamed_pmaps_share_programs_and_still_nest():
    x = np.arange(8.0, dtype=np.float32)
    first = pxla_mlir.pmap(lambda_double)
    first(x)
    expected = _counts_after(3, first, x)
    for _ in range(3):
        out = pxla_mlir.pmap(lambda_double)(x)
    assert _counts() == expected
    assert out.sharding.mesh.axis_names == jax.pmap(lambda_double)(x).sharding.mesh.axis_names
    nested = pxla_mlir.pmap(pxla_mlir.pmap(lambda_double))(x.reshape(2, 4))  # two unnamed levels
    np.testing.assert_array_equal(nested, 2 * x.reshape(2, 4))


def lambda_double(v):
    return v * 2


def test_other_options_are_other_programs():
    x = np.arange(8.0, dtype=np.float32).reshape(8, 1)
    a = pxla_mlir.pmap(lambda_double, "i")(x)
    b = pxla_mlir.pmap(lambda_double, "i", out_axes=1)(x)
    c = pxla_mlir.pmap(lambda_double, "i", mode="partition")(x)
    assert a.shape == (8, 1) and b.shape == (1, 8) and c.shape == (8, 1)
    assert pxla_mlir.pmap(lambda_double, "i", mode="partition").lower(x).pipeline != \
        pxla_mlir.pmap(lambda_double, "i").lower(x).pipeline


@pytest.mark.parametrize("kind", ["pmap", "jit", "xmap"])
def test_caches_never_keep_the_function_alive(kind):
    import gc
    import weakref

    def body(v):
        return v * 5

    make = {"pmap": lambda f: pxla_mlir.pmap(f, "i"), "jit": lambda f: pxla_mlir.jit(f),
            "xmap": lambda f: pxla_mlir.xmap(f, ["b", ...], ["b", ...])}[kind]
    x = np.arange(8.0, dtype=np.float32)
    mapped = make(body)
    mapped(x)
    mapped(x)  # the C++ path
    mapped.lower(x).compile()
    alive = weakref.ref(body)
    del body, mapped
    gc.collect()
    assert alive() is None
def _pmap(body):
    return pxla_mlir.pmap(body, "i")


def _xmap(body):
    return pxla_mlir.xmap(body, in_axes=["i", ...], out_axes=["i", ...])


def _jit(body):
    inner = pxla_mlir.pmap(body, "i")
    return pxla_mlir.jit(lambda x: inner(x))


@pytest.mark.parametrize("make", [_pmap, _xmap, _jit], ids=["pmap", "xmap", "jit"])
def test_disable_jit_runs_the_body_on_every_call_as_jax_pmap(make):
    """Under jax.disable_jit() jax.pmap runs its Python body on every call; code that patches what the
    body calls (here: the scale it reads) must see every call, and the cached program is left alone."""
    calls, scale = [], [2.0]

    def body(v):
        calls.append(1)
        return jax.lax.psum(v, "i") * scale[0]

    def reference(v):
        return jax.vmap(lambda u: jax.lax.psum(u, "i") * scale[0], axis_name="i")(v)

    f, x = make(body), np.arange(8.0, dtype=np.float32)
    first = f(x)
    f(x)
    assert len(calls) == 1
    with jax.disable_jit():
        np.testing.assert_array_equal(f(x), first)
        scale[0] = 3.0  # what a library intercepting the body changes
        np.testing.assert_array_equal(f(x), reference(x))
    assert len(calls) == 3
    compiles = STATS["compiles"]
    np.testing.assert_array_equal(f(x), first)  # jit again: the cached trace, as jax.pmap's jit cache
    assert len(calls) == 3 and STATS["compiles"] == compiles
    ref_calls = []
    jp = jax.pmap(lambda v: (ref_calls.append(1), jax.lax.psum(v, "i"))[1], "i")
    jp(x)
    with jax.disable_jit():
        jp(x)
        jp(x)
    assert len(ref_calls) == 3  # what jax.pmap does, for comparison


class _Key:
    """A key whose equality and hash are chosen apart, as adversarial user keys can be."""

    def __init__(self, hash_, eq):
        self.hash_, self.eq = hash_, eq

    def __hash__(self):
        return self.hash_

    def __eq__(self, other):
        return self.eq(other)


def _lookup(table, key):
    try:
        return table.get(key, "miss")
    except Exception as e:
        return type(e)


def _raise(other):
    raise RuntimeError("compared")


@pytest.mark.parametrize("stored, probe", [
    (_Key(1, lambda o: True), _Key(2, lambda o: True)),  # equal but hashed apart: a dict misses
    (_Key(1, _raise), _Key(2, _raise)),  # comparing raises, but the hashes differ: never compared
    (_Key(1, _raise), _Key(1, _raise)),  # same hash: a dict compares, and raises
    (_Key(1, lambda o: np.ones(3)), _Key(1, lambda o: True)),  # stored == probe is an array: its truth raises
    (_Key(1, lambda o: np.ones(1)), _Key(1, lambda o: False)),  # a truthy non-bool from the stored key's side
    ((1, 2), np.arange(3)),  # an unhashable probe: TypeError, not an elementwise comparison
    ((1, float("nan")), (1, float("nan"))),  # nan != nan: a miss
])
def test_lru_last_key_shortcut_matches_a_dict(stored, probe):
    cache, table = LRU(4), {}
    cache[stored] = table[stored] = "hit"
    assert _lookup(cache, stored) == "hit"  # the shortcut now holds `stored`
    assert _lookup(cache, probe) == _lookup(table, probe)


@pytest.mark.parametrize("make", [lambda f: pxla_mlir.pmap(f, "i"), lambda f: pxla_mlir.jit(f)], ids=["pmap", "jit"])
def test_clear_all_makes_an_object_in_use_trace_again(make):
    """``lru.clear_all()`` forgets the C++ dispatcher too: the next call of the same object traces, lowers and
    compiles again (the jax_enable_checks fixture relies on it)."""
    f = make(lambda x: x * 2)
    x = pxla_mlir.pmap(lambda v: v, "i")(np.arange(8, dtype=np.float32))
    for _ in range(3):
        f(x)
    before = STATS["traces"]
    clear_all()
    out = f(x)
    assert STATS["traces"] - before == 1
    np.testing.assert_array_equal(np.asarray(out), 2 * np.arange(8, dtype=np.float32))


# -- closures over arrays: one program per shapes and dtypes --------------------------------------------------

def _scaled_by(k, make):
    return make(lambda v: v * k)


_KINDS = {"pmap": lambda f: pxla_mlir.pmap(f, "i"), "jit": lambda f: pxla_mlir.jit(f),
          "xmap": lambda f: pxla_mlir.xmap(f, ["b", ...], ["b", ...])}


@contextlib.contextmanager
def _backend_compiles():
    """jax's own count of XLA compiles: its backend-compile duration events (ours record them too)."""
    events = []

    def listener(name, duration, **kwargs):
        if name == "/jax/core/compile/backend_compile_duration":
            events.append(name)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield events
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


@pytest.mark.parametrize("kind", list(_KINDS))
def test_closures_over_arrays_of_one_signature_share_one_compiled_program(kind):
    """Closed-over arrays are arguments of the program: closures over other arrays of the same shape and
    dtype lower to one program, which XLA compiles once (jax.pmap and jax.jit compile each closure)."""
    x = np.arange(24.0, dtype=np.float32).reshape(8, 3)
    scales = [np.full(3, 2.0 + i, np.float32) for i in range(3)]
    before = STATS["compiles"]
    maps = [_scaled_by(k, _KINDS[kind]) for k in scales]
    expected = [np.asarray(jax.vmap(lambda v, k=k: v * k)(x)) for k in scales]  # (jax compiles its own here)
    with _backend_compiles() as compiles:
        for _ in range(3):  # later calls take the C++ path, with each closure's own constant
            for mapped, want in zip(maps, expected):
                np.testing.assert_array_equal(np.asarray(mapped(x)), want)
    assert STATS["compiles"] - before == 1 and len(compiles) == 1
    assert len({id(m.lower(x).compile().runtime_executable()) for m in maps}) == 1
    wider = _scaled_by(np.full(3, 2, np.int32), _KINDS[kind])  # another dtype: a program of its own
    np.testing.assert_array_equal(np.asarray(wider(x)), x * 2)
    assert STATS["compiles"] - before == 2


def test_programs_are_shared_only_while_a_map_holds_them():
    """A program nobody holds any more is freed (the map caches bound memory), so a closure made after the
    others are gone compiles again."""
    x = np.ones((8, 3), np.float32)
    _scaled_by(np.ones(3, np.float32), _KINDS["pmap"])(x)
    gc.collect()
    before = STATS["compiles"]
    _scaled_by(np.zeros(3, np.float32), _KINDS["pmap"])(x)
    assert STATS["compiles"] - before == 1


def test_closures_with_host_callbacks_keep_programs_of_their_own():
    """Host callbacks call the closure's own Python function: such programs are never shared."""
    seen = []

    def tagged(tag):
        def body(v):
            jax.debug.callback(lambda: seen.append(tag))
            return v + 1
        return pxla_mlir.pmap(body, "i")

    maps = [tagged(t) for t in ("a", "b")]
    for mapped in maps:
        mapped(X).block_until_ready()
    assert sorted(seen) == ["a"] * 8 + ["b"] * 8
