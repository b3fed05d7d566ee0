"""Every pmap mistake gets a clear error naming the culprit, as jax does."""

import re

import jax
import numpy as np
import pytest
from jax import lax

import pxla_mlir
from pxla_mlir.errors import PxlaUserError
from pxla_mlir.maps.tracing import UnboundAxisError


def raises(exc, match, fn, *args):
    """``match`` searched in the message (pytest's own match also reads the note of jax's traceback filtering)."""
    with pytest.raises(exc) as caught:
        fn(*args)
    assert re.search(match, str(caught.value)), str(caught.value)


def test_devices_of_the_wrong_length():
    f = pxla_mlir.pmap(lambda x: x, devices=jax.devices()[:4])
    raises(ValueError, r"^Leading axis size of input to pmapped function must equal the number of local devices "
                       r"passed to pmap. Got axis_size=8, num_local_devices=4.\n\(Local devices available to pmap: "
                       r"cpu:0, cpu:1, cpu:2, cpu:3\). Pass exactly 8 devices", f, np.zeros((8, 2)))
    nested = pxla_mlir.pmap(pxla_mlir.pmap(lambda y: y, "j"), "i", devices=jax.devices()[:4])
    raises(ValueError, r"^pmapped function requires 8 local devices to run due to nested pmapped or other parallel "
                       r"functions, but only 4 are available.\n\(outer axis size: 2, ", nested, np.zeros((2, 4)))


def test_more_devices_than_exist():
    raises(ValueError, r"^compiling computation that requires 16 logical devices, but only 8 XLA devices are "
                       r"available \(num_replicas \* num_partitions = 16\): .* \(on CPU: Python: set "
                       r"XLA_FLAGS=--xla_force_host_platform_device_count=16 before importing jax",
           pxla_mlir.pmap(lambda x: x), np.zeros((16, 2)))


def test_too_few_devices_names_the_backend_and_every_way_to_get_more():
    with pytest.raises(ValueError) as e:
        pxla_mlir.pmap(lambda x: x)(np.zeros((16, 2)))
    assert " and 8 CPU devices exist on jax's default backend" in str(e.value)
    assert str(e.value).endswith("(on CPU: Python: set XLA_FLAGS=--xla_force_host_platform_device_count=16 before "
                                 "importing jax, or jax.config.update('jax_num_cpu_devices', 16) before jax starts; "
                                 "pxla-mlir: --cpu-devices 16; pytest: --pxla-cpu-devices 16)")
    raises(ValueError, r"8 CPU devices exist on backend='cpu' \(on CPU: Python: set XLA_FLAGS=",
           pxla_mlir.pmap(lambda x: x, backend="cpu"), np.zeros((16, 2)))
    raises(ValueError, r"it needs 2 × 8 = 16 devices, but only 8 CPU devices are available on jax's default backend",
           pxla_mlir.pmap(lambda x: x, mode="partition", partitions={"m": 8}), np.zeros((2, 3)))


def test_too_few_accelerator_devices_point_to_the_cpu(monkeypatch):
    """A one-chip TPU host (the devices faked: the advice depends on their platform only)."""
    from pxla_mlir.mlir.sharding.devices import too_few_devices

    monkeypatch.delenv("JAX_PLATFORMS", raising=False)

    class Chip:
        platform = "tpu"

    assert too_few_devices(8, [Chip()]) == (
        " on jax's default backend (to use 8 CPU devices instead: Python: set XLA_FLAGS="
        "--xla_force_host_platform_device_count=8 before importing jax and pass backend='cpu' or set JAX_PLATFORMS=cpu;"
        " pxla-mlir: --backend cpu --cpu-devices 8; "
        "pytest: JAX_PLATFORMS=cpu pytest --pxla-cpu-devices 8)")
    assert too_few_devices(8, [Chip()], "tpu").startswith(" on backend='tpu' (to use 8 CPU devices instead")
    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    assert too_few_devices(8, [Chip()]).startswith(" on jax's default backend (JAX_PLATFORMS=tpu) (to use 8 CPU")


def test_nested_pmaps_needing_too_many_devices():
    inner = pxla_mlir.pmap(lambda y: y, "j")
    raises(ValueError, r"requires 16 logical devices", pxla_mlir.pmap(inner, "i"), np.zeros((4, 4)))


def test_in_axes_not_a_tree_prefix():
    raises(ValueError, r"^pmap in_axes specification must be a tree prefix of the corresponding value(.|\n)*"
                       r"pmap in_axes\[0\]\n",
           pxla_mlir.pmap(lambda a, b: a, in_axes=(0, 0, 0)), np.zeros((8,)), np.zeros((8,)))
    # jax's key path into (args, kwargs): in_axes[0][0] is the first positional argument.
    raises(ValueError, r"^pmap in_axes specification must be a tree prefix(.|\n)*key path\n +pmap in_axes\[0\]\[0\]\n",
           pxla_mlir.pmap(lambda a: a, in_axes=((0, 0),)), (np.zeros(8),))


def test_inconsistent_mapped_sizes():
    raises(ValueError, r"pmap got inconsistent sizes for array axes to be mapped:\n  \* args\[0\] has shape "
                       r"\(8, 3\) and axis 0 is to be mapped\n  \* args\[1\] has shape \(3, 4\) and axis 1 is to be mapped",
           pxla_mlir.pmap(lambda a, b: a, in_axes=(0, 1)), np.zeros((8, 3)), np.zeros((3, 4)))


def test_axis_size_disagrees_with_arguments():
    raises(ValueError, r"axis_size=4 was given", pxla_mlir.pmap(lambda a: a, axis_size=4), np.zeros((8, 3)))


def test_nothing_mapped():
    raises(ValueError, r"^pmap requires at least one argument with a mapped axis \(in_axes not None\), or axis_size=",
           pxla_mlir.pmap(lambda a: a, in_axes=None), np.zeros(3))


def test_non_array_argument():
    raises(TypeError, r"pmap argument args\[1\] of type str is not an array; pass arrays or scalars, or list its "
                      r"position in static_broadcasted_argnums", pxla_mlir.pmap(lambda a, b: a, in_axes=(0, None)),
           np.zeros(8), "hello")


def test_unhashable_static_argument():
    raises(ValueError, r"^Non-hashable static arguments are not supported, as this can lead to unexpected "
                       r"cache-misses. Static argument \(index 1\) of type <class 'list'> for function <lambda> is "
                       r"non-hashable.$", pxla_mlir.pmap(lambda a, b: a, static_broadcasted_argnums=1), np.zeros(8), [1])


def test_in_axis_out_of_range_and_scalar():
    raises(ValueError, r"pmap in_axes 2 is out of range for args\[0\] with shape \(8, 3\)",
           pxla_mlir.pmap(lambda a: a, in_axes=2), np.zeros((8, 3)))
    raises(ValueError, r"a scalar cannot be mapped", pxla_mlir.pmap(lambda a: a), np.float32(1))


def test_out_axis_out_of_range():
    raises(ValueError, r"pmap out_axes 3 is out of range for output 0 of shape \(3,\) \(the mapped output has 2 "
                       r"dimensions\)", pxla_mlir.pmap(lambda a: a, out_axes=3), np.zeros((8, 3)))


def test_unbound_axis_name():
    raises(UnboundAxisError, r"^unbound axis name: j. A collective \(psum, axis_index, \.\.\.\) refers to an axis "
                             r"name that no enclosing map binds \(bound: 'i'\)",
           pxla_mlir.pmap(lambda a: lax.psum(a, "j"), "i"), np.zeros((8, 3)))
    raises(UnboundAxisError, r"^unbound axis name: q\..*\(bound: none\); bind it with a pxla_mlir.pmap\(\.\.\., "
                             r"axis_name='q'\) or pxla_mlir.xmap naming 'q'",
           pxla_mlir.jit(lambda a: lax.psum(a, "q")), np.zeros((8, 3)))


@pytest.mark.parametrize("axes", ["in_axes", "out_axes"])
def test_in_axes_tree_errors_name_no_private_jax_class(axes):
    with pytest.raises(ValueError, match=rf"pmap {axes} specification must be a tree prefix") as info:
        pxla_mlir.pmap(lambda a: a, **{axes: ((0, 0),)})(np.zeros((8, 2)))
    assert "PytreeLeaf" not in str(info.value) and "a leaf (an array or scalar)" in str(info.value)


def test_out_axes_none_on_a_varying_value():
    raises(ValueError, r"output \[1\] of pmap '<lambda>' has out_axes=None, but it may differ between the devices "
                       r"of axis 'i'.*reduce it first",
           pxla_mlir.pmap(lambda a: (lax.psum(a, "i"), a * 2), "i", out_axes=(None, None)), np.zeros((8, 3)))
    raises(ValueError, r"has out_axes=None",
           pxla_mlir.pmap(lambda a: lax.axis_index("i") + 0 * lax.psum(a, "i"), "i", out_axes=None),
           np.zeros((8, 3)))


def test_nested_pmap_reusing_an_axis_name():
    inner = pxla_mlir.pmap(lambda y: y, "i")
    raises(ValueError, r"reuses the axis name 'i' of an enclosing pmap",
           pxla_mlir.pmap(lambda x: inner(x), "i"), np.zeros((2, 4)))


def test_nested_pmap_with_devices():
    inner = pxla_mlir.pmap(lambda y: y, "j", devices=jax.devices()[:4])
    raises(PxlaUserError, r"nested pmap '<lambda>' was given devices=\[0, 1, 2, 3\]; only the outermost "
                                    r"pmap chooses devices: pass them to the outermost pmap",
           pxla_mlir.pmap(lambda x: inner(x), "i"), np.zeros((2, 4)))
    in_jit = pxla_mlir.jit(lambda x: pxla_mlir.pmap(lambda r: inner(r), "i")(x))  # nested, inside a jit too
    raises(ValueError, r"nested pmap '<lambda>' was given devices=", in_jit, np.zeros((2, 4)))


def test_pmap_with_devices_inside_pxla_mlir_jit_is_not_called_nested():
    """Inside pxla_mlir.jit a pmap is not nested, but its devices are the jit's: the message says so."""
    def step(s, b):
        return pxla_mlir.pmap(lambda x, y: x + y, devices=jax.devices()[:1])(s, b)

    s, b = np.ones((1, 3), np.float32), np.full((1, 3), 2.0, np.float32)
    with pytest.raises(ValueError, match=r"^pmap '<lambda>' inside a pxla_mlir.jit function was given devices=\[0\]; "
                                         r"inside pxla_mlir.jit the devices come from the jit: pass them as "
                                         r"pxla_mlir.jit\(f, devices=...\) and leave devices= out of the pmap") as e:
        pxla_mlir.jit(step)(s, b)
    assert isinstance(e.value, PxlaUserError) and "nested" not in str(e.value)
    # What the message says to do works.
    fixed = pxla_mlir.jit(lambda s, b: pxla_mlir.pmap(lambda x, y: x + y)(s, b), devices=jax.devices()[:1])
    out = fixed(s, b)
    np.testing.assert_array_equal(np.asarray(out), s + b)
    assert out.sharding.device_set == {jax.devices()[0]}


def test_bad_options():
    with pytest.raises(ValueError, match="mode must be 'replica' or 'partition', got 'spmd'"):
        pxla_mlir.pmap(lambda x: x, mode="spmd")
    with pytest.raises(ValueError, match="unshard must be 'all-gather' or 'all-reduce'"):
        pxla_mlir.pmap(lambda x: x, unshard="scatter")


def test_compiled_with_other_arguments():
    compiled = pxla_mlir.pmap(lambda x: x * 2).lower(np.zeros((8, 3), np.float32)).compile()
    raises(TypeError, r"^Argument types differ from the types for which this computation was compiled. Perhaps you "
                      r"are calling the compiled executable with a different enable_x64 mode than when it was AOT "
                      r"compiled\? The mismatches are:\nArgument 'flat_args\[0\]' compiled with float32\[8,3\] and "
                      r"called with float32\[8,4\] \(it is args\[0\] of the call\)$", compiled, np.zeros((8, 4), np.float32))
    raises(TypeError, r"^Function compiled with input pytree does not match the input pytree it was called with",
           compiled, (np.zeros((8, 3)),))


def nested_lists(depth, leaf):
    tree = leaf
    for _ in range(depth):
        tree = [tree]
    return tree


def test_arguments_nested_deeper_than_jax_flattens():
    """jax's C++ flattening stops at a recursion limit and leaks its
    RecursionError (once an AttributeError from deep inside a pmap call).
    The limit is Python's own on 3.11 and CPython's fixed C cap on 3.12+;
    the message says which, and its advice works."""
    import sys

    from pxla_mlir.jaxbridge.pytree_depth import flatten_depth_cap

    fixed_cap = sys.version_info >= (3, 12)
    deep = nested_lists(2000 if not fixed_cap else flatten_depth_cap() + 500, np.ones(8, np.float32))
    if fixed_cap:
        expected = (r"jax flattens one level per recursive C call, and Python 3\.1\d caps those at a depth of its own "
                    rf"\(about {flatten_depth_cap()} levels here; sys\.setrecursionlimit\(\) does not raise it\)\. "
                    r"Pass a flatter structure")
    else:
        expected = r".*sys.getrecursionlimit\(\) = 1000\)\. Pass a flatter structure"
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # Python's default, whatever ran before in this interpreter
    try:
        xm = pxla_mlir.xmap(lambda t: t, in_axes=["m", ...], out_axes=["m", ...])
        for f in (pxla_mlir.pmap(lambda t: t, "i"), pxla_mlir.jit(lambda t: t), xm):
            for call, where in ((f, "'<lambda>'"), (f.lower, r"'<lambda>'\.lower\(\)")):
                # (jax's own .lower() leaks a SystemError, its cause the RecursionError)
                with pytest.raises(RecursionError, match=rf"^the arguments of {where} nest more pytree levels than "
                                                         rf"jax can flatten: {expected}"):
                    call(deep)
        if fixed_cap:  # what the message advises works: the leaves, flat
            while isinstance(deep, list):
                deep = deep[0]
            deep = [deep]
        else:  # either piece of advice works: here the higher limit
            sys.setrecursionlimit(6000)
        leaves = jax.tree.leaves(pxla_mlir.pmap(lambda t: t, "i")(deep))
    finally:
        sys.setrecursionlimit(limit)
    np.testing.assert_array_equal(leaves[0], np.ones(8, np.float32))
    # Errors of shallow arguments pass through unchanged.
    with pytest.raises(ValueError, match="must equal the number of local devices"):
        pxla_mlir.pmap(lambda t: t, "i", devices=jax.devices()[:4])(nested_lists(3, np.ones(8)))


@pytest.mark.subprocess
def test_outputs_too_big_for_memory_raise_at_the_call():
    """Across devices XLA allocates outputs after the call returns: reading one aborted the process
    (`Check failed: buffer_.IsConcrete()`). The call raises RESOURCE_EXHAUSTED with the size, as
    jax.jit does on one device, and again on the next call. Isolated: the old failure is an abort."""
    from isolation import run_isolated

    out = run_isolated("""
        import jax, jax.numpy as jnp, numpy as np, pxla_mlir
        from pxla_mlir.runtime.memory import host_memory_bytes
        big = max(2**40, 1 << int(host_memory_bytes()).bit_length())  # more than this host has
        cases = {
            "pmap": (pxla_mlir.pmap(lambda v: jnp.zeros((big // 8,), jnp.int8) + v, "i"), np.ones(8, np.int8)),
            "xmap": (pxla_mlir.xmap(lambda v: jnp.zeros((big,), jnp.int8) + v, in_axes=[...], out_axes=[...]),
                     np.int8(1)),
        }
        for name, (f, arg) in cases.items():
            for attempt in range(2):
                try:
                    y = f(arg)
                    print(name, "returned", np.asarray(y[..., :2]).tolist())
                except jax.errors.JaxRuntimeError as e:
                    print(name, str(e).split(":")[0], f"allocating {big} bytes" in str(e))
        print("alive", float(np.asarray(pxla_mlir.pmap(lambda v: v + 1, "i")(np.ones(8)))[0]))
    """, timeout=120)
    assert out.splitlines() == ["pmap RESOURCE_EXHAUSTED True"] * 2 + ["xmap RESOURCE_EXHAUSTED True"] * 2 + \
        ["alive 2.0"]
