"""The lowering cache: an equal program (jaxpr, options, devices, versions)
reuses an earlier lowering's modules, in the process and, with the persistent
cache on, in later processes; anything else lowers anew."""

import dataclasses
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pxla_mlir
from pxla_mlir.jaxbridge import jaxpr_fingerprint
from pxla_mlir.mlir.pass_infra import ModulePass
from pxla_mlir.mlir.pass_infra.registry import REGISTRY
from pxla_mlir.mlir.pipelines import PmapPipeline
from pxla_mlir.mlir.support.stats import STATS
from pxla_mlir.stages import lowering_cache

X = np.arange(128, dtype=np.float32).reshape(8, 16)


@pytest.fixture(autouse=True)
def _fresh_cache():
    lowering_cache.clear()
    yield
    lowering_cache.clear()


def counts():
    return STATS["lowerings"], STATS["lowering_cache_hits"]


def test_an_equal_program_is_lowered_once_and_gives_the_same_module():
    before = counts()
    texts = [pxla_mlir.pmap(lambda v: lax.psum(jnp.sin(v) * 2, "i"), "i").lower(X).as_text(debug_info=True)
             for _ in range(3)]
    assert np.subtract(counts(), before).tolist() == [1, 2]
    assert texts[0] == texts[1] == texts[2]
    os.environ[lowering_cache.ENV] = "0"
    try:
        cold = pxla_mlir.pmap(lambda v: lax.psum(jnp.sin(v) * 2, "i"), "i").lower(X)
    finally:
        del os.environ[lowering_cache.ENV]
    assert cold.as_text() == pxla_mlir.pmap(lambda v: lax.psum(jnp.sin(v) * 2, "i"), "i").lower(X).as_text()


def test_jaxs_lowering_counter_sees_none_for_a_lowering_from_the_cache(monkeypatch):
    """What docs/porting.md tells a port of jax's tests: jax counts 1 per new function for jax.pmap, and 0 for a
    pxla_mlir map whose lowering came from the cache, unless the cache is off."""
    from jax._src import test_util as jtu  # jax's own counter of programs lowered

    def lowerings(pmap) -> int:
        with jtu.count_jit_and_pmap_lowerings() as count:
            pmap(lambda v: v * 2.0)(X)
        return count()

    assert [lowerings(jax.pmap) for _ in range(2)] == [1, 1]
    assert [lowerings(pxla_mlir.pmap) for _ in range(2)] == [1, 0]
    monkeypatch.setenv(lowering_cache.ENV, "0")
    assert lowerings(pxla_mlir.pmap) == 1


def test_closed_over_arrays_are_arguments_so_their_values_never_come_from_the_cache():
    outs = [np.asarray(pxla_mlir.pmap(lambda v: v + jnp.full((16,), float(c)), "i")(X)) for c in (1, 2, 3)]
    for c, out in zip((1, 2, 3), outs):
        np.testing.assert_array_equal(out, X + c)


def test_constants_inside_branches_and_calls_give_their_own_numbers():
    for c in (1.0, 2.0, 2.5):
        arr = np.full((16,), c, np.float32)
        out = pxla_mlir.pmap(lambda v: lax.cond(v[0] > -1, lambda y: y + arr, lambda y: y - arr, v) +
                             jax.jit(lambda y: y * arr)(v), "i")(X)
        np.testing.assert_array_equal(np.asarray(out), (X + c) + X * c)


@pytest.mark.parametrize("change", ["literal", "dtype", "shape", "options", "axis", "name", "devices", "x64"])
def test_what_decides_the_program_is_in_the_key(change):
    def lowered(c=2.0, x=X, name="f", devices=None, **options):
        def f(v):
            return lax.psum(v * c, "i")
        f.__name__ = name
        return pxla_mlir.pmap(f, "i", devices=devices, **options).lower(x)

    lowered()
    before = counts()
    if change == "literal":
        changed = lowered(c=3.0)
    elif change == "dtype":
        changed = lowered(x=X.astype(np.int32), c=2)
    elif change == "shape":
        changed = lowered(x=X[:, :8])
    elif change == "options":
        changed = lowered(mode="partition")
    elif change == "axis":
        changed = pxla_mlir.pmap(lambda v: lax.psum(v * 2.0, "j"), "j").lower(X)
    elif change == "name":
        changed = lowered(name="g")
    elif change == "devices":
        changed = lowered(devices=jax.devices()[::-1])
    else:
        with jax.enable_x64(True):
            changed = lowered(x=X.astype(np.float64))
    assert np.subtract(counts(), before).tolist() == [1, 0], f"a changed {change} lowered anew"
    assert changed.as_text()


@pytest.mark.parametrize("lowering", ["replica", "manual", "vectorize"])
def test_xmaps_share_lowerings_only_on_the_same_mesh_and_resources(lowering):
    devices = np.array(jax.devices())
    x = np.arange(64, dtype=np.float32).reshape(8, 8)

    def run(mesh_devices, resource):
        mesh = pxla_mlir.Mesh(mesh_devices.reshape(4, 2), ("x", "y"))
        with mesh:
            f = pxla_mlir.xmap(lambda v: lax.psum(v * 2, "a") + lax.axis_index("a"), in_axes=["a", ...],
                               out_axes=["a", ...], axis_resources={"a": resource}, lowering=lowering)
            out = np.asarray(f(x))
        np.testing.assert_array_equal(out, np.broadcast_to(2 * x.sum(0), x.shape) + np.arange(8)[:, None])

    before = counts()
    run(devices, "x")
    run(devices, "x")
    assert np.subtract(counts(), before).tolist() == [1, 1]
    run(devices[::-1], "x")  # other devices: another program
    run(devices, "y")
    assert np.subtract(counts(), before).tolist() == [3, 1]


def test_a_lowering_from_the_cache_imports_its_pxla_form_again_when_asked():
    """The entry keeps the final module alone: the pxla form of a lowering from the cache is imported anew
    from its inputs (no pipeline runs), equal to the one the cold lowering imported, even outside the mesh
    an xmap was lowered under. (As jax's lowering, it is located where it was asked for.)"""
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    mesh = pxla_mlir.Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))

    def pmapped():
        return pxla_mlir.pmap(lambda v: lax.psum(jnp.sin(v) * 2, "i"), "i").lower(X)

    def xmapped():
        with mesh:
            return pxla_mlir.xmap(lambda v: lax.psum(v * 2, "a"), in_axes=["a", ...], out_axes=["a", ...],
                                  axis_resources={"a": "x"}).lower(x)

    for make in (pmapped, xmapped):
        before = counts()
        cold, warm = [make() for _ in range(2)]  # lowered at the same line: the same locations
        assert np.subtract(counts(), before).tolist() == [1, 1], "the second lowering came from the cache"
        assert warm.pxla_text() == cold.pxla_text() and "stablehlo." in cold.pxla_text()
        assert 'loc("' in warm.pxla_text(debug_info=True)
        assert np.subtract(counts(), before).tolist() == [1, 1], "importing the pxla form runs no pipeline"
        assert warm.as_text() == cold.as_text()


def test_programs_with_host_callbacks_are_never_cached():
    def f(v):
        return jax.pure_callback(lambda a: a * 2, jax.ShapeDtypeStruct(v.shape, v.dtype), v)

    before = counts()
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(pxla_mlir.pmap(lambda v: f(v), "i")(X)), X * 2)
    assert np.subtract(counts(), before).tolist() == [2, 0]


def test_a_plugin_pass_with_a_new_version_is_another_lowering():
    @dataclasses.dataclass(frozen=True)
    class Tag(ModulePass):
        argument = "test-lowering-cache-tag"
        summary = "does nothing"
        checks_only = True

        def run(self, module):
            pass

    @dataclasses.dataclass(frozen=True)
    class Inputs:
        program: str
        pipeline: PmapPipeline

    inputs = Inputs("program", PmapPipeline(mhlo_passes="test-lowering-cache-tag"))
    with REGISTRY.restored_after():
        REGISTRY.add(Tag, Tag.__module__)
        first = lowering_cache.key(inputs)
        Tag.version = "2"  # even changed in place
        second = lowering_cache.key(inputs)
        assert first is not None and second is not None and first != second


def test_the_digest_reads_every_byte_and_refuses_what_it_cannot_read():
    big = np.arange(5000, dtype=np.float32)
    other = big.copy()
    other[4321] += 1

    def body(c):
        return jax.make_jaxpr(lambda x: lax.cond(x[0] > 0, lambda y: y + c, lambda y: y, x))(big)

    assert jaxpr_fingerprint.digest(body(big)) == jaxpr_fingerprint.digest(body(big.copy()))
    assert jaxpr_fingerprint.digest(body(big)) != jaxpr_fingerprint.digest(body(other))  # one element of 5,000
    assert jaxpr_fingerprint.digest(jax.make_jaxpr(lambda x: x + 1.0)(big)) != \
        jaxpr_fingerprint.digest(jax.make_jaxpr(lambda x: x + 1.0000001)(big))
    with_callable = jax.make_jaxpr(lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x))(big)
    assert jaxpr_fingerprint.digest(with_callable) is None
    assert jaxpr_fingerprint.digest(object()) is None


# -- across processes: the persistent cache --------------------------------------------------------------------

CHILD = textwrap.dedent("""
    import os, sys, json, warnings
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax, numpy as np, pxla_mlir
    from jax import lax
    from pxla_mlir.jaxbridge import stablehlo_lowering
    from pxla_mlir.mlir.support.stats import STATS
    contexts = []  # MLIR contexts made (jax's make_ir_context, which every lowering and parse goes through)
    make_context = stablehlo_lowering._jax_make_ir_context
    stablehlo_lowering._jax_make_ir_context = lambda *a, **k: contexts.append(1) or make_context(*a, **k)
    if sys.argv[2] == "python":  # else PXLA_MLIR_CACHE_DIR names it
        pxla_mlir.enable_compilation_cache(sys.argv[1])
    f = lambda v: lax.psum(jax.numpy.tanh(v), "i") + lax.axis_index("i")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
        out = pxla_mlir.pmap(f, "i")(x)
    made = len(contexts)
    print(json.dumps({"out": np.asarray(out).tolist(), "lowerings": STATS["lowerings"],
                      "loads": STATS["lowering_cache_loads"], "contexts": made,
                      "text": pxla_mlir.pmap(f, "i").lower(x).as_text(debug_info=True),
                      "pxla": pxla_mlir.pmap(f, "i").lower(x).pxla_text(),
                      "rejected": [str(w.message) for w in caught if "cache entry" in str(w.message)]}))
""")


def child(cache, n: int = 1, how: str = "python") -> list[dict]:
    import json

    env = {**os.environ, "PXLA_MLIR_CACHE_DIR": str(cache)} if how == "env" else \
        {k: v for k, v in os.environ.items() if k != "PXLA_MLIR_CACHE_DIR"}
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(cache), how], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(n)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def expected():
    x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    return np.tanh(x).sum(0) + np.arange(8, dtype=np.float32)[:, None]


@pytest.mark.subprocess
def test_the_environment_variable_turns_the_persistent_lowerings_on(tmp_path):
    (cold,) = child(tmp_path, how="env")
    (warm,) = child(tmp_path, how="env")
    assert (cold["lowerings"], cold["loads"], warm["lowerings"], warm["loads"]) == (1, 0, 0, 1)
    assert warm["out"] == cold["out"]


@pytest.mark.subprocess
def test_a_later_process_skips_lowering_and_a_damaged_entry_is_rejected(tmp_path):
    (cold,) = child(tmp_path)
    assert (cold["lowerings"], cold["loads"]) == (1, 0)
    entries = [p for p in tmp_path.iterdir() if p.name.startswith(lowering_cache.LOWERINGS.prefix)]
    assert len(entries) == 1
    (warm,) = child(tmp_path)
    assert (warm["lowerings"], warm["loads"], warm["rejected"]) == (0, 1, [])
    np.testing.assert_allclose(np.asarray(warm["out"]), expected(), rtol=1e-6)
    assert warm["out"] == cold["out"]
    # The executable came from the cache as well: nothing was parsed, no MLIR context made; the module is
    # parsed when asked for, and is the one the cold process lowered.
    assert cold["contexts"] >= 1 and warm["contexts"] == 0
    assert warm["text"] == cold["text"]
    assert warm["pxla"] == cold["pxla"] and "stablehlo" in warm["pxla"]  # imported again, when asked for
    raw = bytearray(entries[0].read_bytes())
    raw[-5] ^= 0xFF
    entries[0].write_bytes(bytes(raw))
    (damaged,) = child(tmp_path)
    assert (damaged["lowerings"], damaged["loads"]) == (1, 0)
    assert damaged["rejected"] and "lowering cache entry" in damaged["rejected"][0]
    assert damaged["out"] == cold["out"]
    (again,) = child(tmp_path)
    assert (again["lowerings"], again["loads"], again["rejected"]) == (0, 1, [])


@pytest.mark.subprocess
def test_processes_starting_at_once_never_read_half_an_entry(tmp_path):
    runs = child(tmp_path, n=4)
    for run in runs:
        assert run["rejected"] == []
        np.testing.assert_allclose(np.asarray(run["out"]), expected(), rtol=1e-6)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".pxla-tmp-")], "no temporary file is left"
    (later,) = child(tmp_path)
    assert (later["lowerings"], later["loads"], later["rejected"]) == (0, 1, [])


def test_a_nested_pmap_placed_by_piece_keeps_its_layout_from_the_cache():
    """Import places a nested pmap's values by piece and the layout says so: a lowering from the cache takes
    that layout from the entry (no pxla form parsed) and computes the same numbers."""
    x = np.arange(2 * 4 * 3, dtype=np.int32).reshape(2, 4, 3)

    def outer(v):  # a new function object each time: only the lowering cache can share
        return pxla_mlir.pmap(lambda y: y * 2 + lax.axis_index("j"), "j")(v).cumsum(0)

    before = counts()
    cold, warm = (pxla_mlir.pmap(lambda v: outer(v), "i").lower(x) for _ in range(2))
    assert np.subtract(counts(), before).tolist() == [1, 1]
    layouts = [low._lowering.layout for low in (cold, warm)]
    assert layouts[0].in_shardings[0].mesh.axis_names != ("i", "_pxla_rep")  # placed over the inner level
    assert layouts[0] == layouts[1]
    assert warm._lowering._pxla is not None and callable(warm._lowering._pxla), "the pxla form was not parsed"
    want = (x * 2 + np.arange(4)[None, :, None]).cumsum(1)
    for low in (cold, warm):
        np.testing.assert_array_equal(np.asarray(low.compile()(x)), want)


def _replace(entry, how: str) -> None:
    """Puts something that is not a readable entry where ``entry`` is."""
    entry.unlink()
    if how == "directory":
        entry.mkdir()
    elif how == "directory with a file":
        entry.mkdir()
        (entry / "x").write_text("x")
    elif how == "fifo":
        os.mkfifo(entry)  # jax's own read would block on it forever
    elif how == "dangling link":
        entry.symlink_to(entry.parent / "nothing-here")
    elif how == "unreadable":
        entry.write_bytes(b"x" * 64)
        entry.chmod(0)


@pytest.mark.subprocess
@pytest.mark.parametrize("how", ["directory", "directory with a file", "fifo", "dangling link", "unreadable"])
def test_an_entry_that_cannot_be_read_is_rejected_and_computed_anew(tmp_path, how):
    """Every entry of ours, a lowering's and an executable's: a CacheEntryRejected warning saying why, the right
    numbers, never a raw IsADirectoryError, a hang or a crash (the child has a hard timeout)."""
    if how == "unreadable" and os.geteuid() == 0:
        pytest.skip("root reads a file without read permission")
    (cold,) = child(tmp_path)
    entries = sorted(p for p in tmp_path.iterdir() if p.name.startswith("pxla-"))
    assert {p.name.split("-")[1] for p in entries} == {"lowering", "exe"}, entries
    for entry in entries:
        _replace(entry, how)
    (after,) = child(tmp_path)
    assert after["out"] == cold["out"]
    assert len(after["rejected"]) == 2, after["rejected"]
    assert {"lowering cache entry", "compilation cache entry"} == \
        {kind for kind in ("lowering cache entry", "compilation cache entry") for r in after["rejected"] if kind in r}
    why = {"directory": "it is a directory", "directory with a file": "it is a directory", "fifo": "not a regular file",
           "dangling link": "a symbolic link to nothing", "unreadable": "permission denied"}[how]
    assert all(why in r for r in after["rejected"]), after["rejected"]
    if how == "directory with a file":
        assert all("could not be removed (remove it by hand)" in r for r in after["rejected"]), after["rejected"]
    else:  # removed, written again, used by the next process
        (healed,) = child(tmp_path)
        assert (healed["lowerings"], healed["loads"], healed["rejected"]) == (0, 1, [])


def test_entry_kinds_have_disjoint_prefixes():
    from pxla_mlir.runtime.persistent_cache import EXECUTABLES

    kinds = [EXECUTABLES, lowering_cache.LOWERINGS]
    for a in kinds:
        for b in kinds:
            assert a is b or not b.prefix.startswith(a.prefix), (a.prefix, b.prefix)
    assert len({k.magic for k in kinds}) == len(kinds)


def test_the_source_digest_follows_the_code(tmp_path, monkeypatch):
    """A checkout (or an editable install) is told by its files; an installed wheel by its RECORD (one read):
    tests/project/test_installed_wheel.py checks that one."""
    from pxla_mlir import version

    digest, how = version.source_digest()
    assert how == "files" and len(digest) == 64
    site = tmp_path / "site"
    (site / f"pxla_mlir-{version.__version__}.dist-info").mkdir(parents=True)
    (site / f"pxla_mlir-{version.__version__}.dist-info" / "RECORD").write_text("pxla_mlir/a.py,sha256=x,1\n")
    assert version._installed_record(str(site)) == b"pxla_mlir/a.py,sha256=x,1\n"
    (site / f"pxla_mlir-{version.__version__}.dist-info" / "direct_url.json").write_text(
        '{"url": "file:///src", "dir_info": {"editable": true}}')
    assert version._installed_record(str(site)) is None  # editable: its files are the checkout's
