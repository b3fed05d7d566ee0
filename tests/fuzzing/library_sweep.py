"""jax's own library under pxla_mlir.pmap against jax.pmap, on 8 CPU devices.

jax's library binds primitives that jax lowers in its own ways (per
platform, through ``mlir.lower_fun``, or as high-level primitives such as
jax 0.12's ``call_hi_primitive``, expanded before lowering): whatever
jax.pmap runs, pxla_mlir.pmap must run too, with the same numbers (exactly
for integers and booleans). :data:`CASES` names one body per family (jax.numpy,
jax.scipy, jax.nn, jax.random, lax control flow, custom derivatives, remat,
host callbacks); the suite runs :data:`QUICK` (tests/pmaps/test_jax_library.py).
``--auto`` also calls every public function of jax.numpy, jax.nn and
jax.scipy's modules that takes one or two arrays on float matrices, where
jax.pmap runs it (what jax.pmap refuses is counted, not listed).

    python tests/fuzzing/library_sweep.py            # every case: one line each, then a summary
    python tests/fuzzing/library_sweep.py --auto     # and the functions found by name
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # the suite's conftest sets these for tests
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse
import dataclasses
import inspect
import sys
import time
import zlib
from collections.abc import Callable

import jax
import jax.numpy as jnp
import jax.scipy as jsp
import numpy as np
from jax import lax

import pxla_mlir

DEVICES = 8
FLOAT_TOL = 1e-5


@dataclasses.dataclass(frozen=True)
class Case:
    body: Callable  # one device's body, bound over the pmap axis "i"
    shapes: tuple  # per operand: its per-device shape (float32), or (shape, dtype)
    tol: float = FLOAT_TOL  # floats only; integers and booleans compare exactly


def operands(name: str, shapes) -> list[np.ndarray]:
    """Seeded inputs for the 8 devices: leading axis 8, per-device shapes as given."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    out = []
    for spec in shapes:
        typed = len(spec) == 2 and isinstance(spec[1], type)
        shape, dtype = spec if typed else (spec, np.float32)
        full = (DEVICES, *shape)
        if dtype == np.int32:
            out.append(rng.integers(0, 5, size=full).astype(np.int32))
        elif dtype == np.uint32:
            out.append(rng.integers(0, 2**31, size=full).astype(np.uint32))
        elif dtype == np.complex64:
            out.append((rng.normal(size=full) + 1j * rng.normal(size=full)).astype(np.complex64))
        else:
            out.append(rng.normal(size=full).astype(dtype))
    return out


def _spd(a):
    """A well-conditioned symmetric positive definite matrix from ``a``."""
    return a @ a.T + a.shape[-1] * jnp.eye(a.shape[-1], dtype=a.dtype)


def _key(seed):
    return jax.random.key(seed[0])


@jax.custom_jvp
def _softclip(x):
    return jnp.tanh(x) * 2.0


_softclip.defjvp(lambda primals, tangents: (_softclip(primals[0]), 2.0 * tangents[0] / jnp.cosh(primals[0]) ** 2))


@jax.custom_vjp
def _scaled(x):
    return x * 3.0


_scaled.defvjp(lambda x: (x * 3.0, None), lambda _, g: (g * 3.0,))

M = (3, 3)
V = (6,)
I32 = ((6,), np.int32)
SEED = ((1,), np.uint32)

CASES: dict[str, Case] = {
    # jax.numpy
    "jnp.searchsorted": Case(lambda a, v: jnp.searchsorted(jnp.sort(a), v), (V, (4,))),
    "jnp.searchsorted(right)": Case(lambda a, v: jnp.searchsorted(jnp.sort(a), v, side="right"), (V, (4,))),
    "jnp.digitize": Case(lambda a: jnp.digitize(a, jnp.array([-1.0, 0.0, 1.0])), (V,)),
    "jnp.interp": Case(lambda x: jnp.interp(x, jnp.linspace(-2, 2, 5), jnp.arange(5.0)), (V,)),
    "jnp.histogram": Case(lambda a: jnp.histogram(a, bins=4, range=(-2.0, 2.0))[0], (V,)),
    "jnp.einsum": Case(lambda a, b: jnp.einsum("ij,jk->ik", a, b), (M, M)),
    "jnp.einsum(trace)": Case(lambda a: jnp.einsum("ii", a), (M,)),
    "jnp.frexp/ldexp": Case(lambda a: (jnp.frexp(a * 100), jnp.ldexp(a, jnp.frexp(a)[1])), (V,)),
    "jnp.nonzero(size)": Case(lambda a: jnp.nonzero(a > 0, size=6, fill_value=-1)[0], (V,)),
    "jnp.argwhere(size)": Case(lambda a: jnp.argwhere(a > 0, size=6, fill_value=-1), (V,)),
    "jnp.unique(size)": Case(lambda a: jnp.unique(a, size=6, fill_value=-1), (I32,)),
    "jnp.bincount(length)": Case(lambda a: jnp.bincount(a, length=5), (I32,)),
    "jnp.sort/argsort": Case(lambda a: (jnp.sort(a), jnp.argsort(a)), (V,)),
    "jnp.lexsort": Case(lambda a, b: jnp.lexsort((a, b)), (I32, I32)),
    "jnp.cumsum/cumprod": Case(lambda a: (jnp.cumsum(a), jnp.cumprod(a)), (V,)),
    "jnp.median/percentile": Case(lambda a: (jnp.median(a), jnp.percentile(a, 30.0)), (V,)),
    "jnp.isin": Case(lambda a: jnp.isin(a, jnp.array([1, 3])), (I32,)),
    "jnp.polyval": Case(lambda c, x: jnp.polyval(c, x), ((4,), V)),
    "jnp.convolve": Case(lambda a, b: jnp.convolve(a, b), (V, (3,))),
    "jnp.take_along_axis": Case(lambda a: jnp.take_along_axis(a, jnp.argsort(a), axis=0), (V,)),
    "jnp.linalg.inv/det": Case(lambda a: (jnp.linalg.inv(_spd(a)), jnp.linalg.det(_spd(a))), (M,), tol=1e-4),
    "jnp.linalg.solve": Case(lambda a, b: jnp.linalg.solve(_spd(a), b), (M, (3,)), tol=1e-4),
    "jnp.linalg.eigh": Case(lambda a: jnp.linalg.eigvalsh(_spd(a)), (M,), tol=1e-4),
    "jnp.linalg.svd": Case(lambda a: jnp.linalg.svd(a, compute_uv=False), (M,), tol=1e-4),
    "jnp.linalg.qr": Case(lambda a: jnp.abs(jnp.linalg.qr(a)[1]), (M,), tol=1e-4),
    "jnp.linalg.cholesky": Case(lambda a: jnp.linalg.cholesky(_spd(a)), (M,), tol=1e-4),
    "jnp.linalg.norm/slogdet": Case(lambda a: (jnp.linalg.norm(a), jnp.linalg.slogdet(_spd(a))[1]), (M,), tol=1e-4),
    "jnp.fft.fft/rfft": Case(lambda a: (jnp.fft.fft(a), jnp.fft.rfft(a)), (V,), tol=1e-4),
    # jax.scipy
    "jsp.linalg.expm": Case(lambda a: jsp.linalg.expm(a * 0.3), (M,), tol=1e-4),
    "jsp.linalg.solve": Case(lambda a, b: jsp.linalg.solve(_spd(a), b, assume_a="pos"), (M, (3,)), tol=1e-4),
    "jsp.linalg.lu_factor": Case(lambda a: jsp.linalg.lu_factor(a)[0], (M,), tol=1e-4),
    "jsp.linalg.cho_solve": Case(lambda a, b: jsp.linalg.cho_solve(jsp.linalg.cho_factor(_spd(a)), b), (M, (3,)),
                                 tol=1e-4),
    "jsp.linalg.solve_triangular": Case(lambda a, b: jsp.linalg.solve_triangular(_spd(a), b, lower=False),
                                        (M, (3,)), tol=1e-4),
    "jsp.special.gammaln/digamma": Case(lambda a: (jsp.special.gammaln(jnp.abs(a) + 0.5),
                                                   jsp.special.digamma(jnp.abs(a) + 0.5)), (V,), tol=1e-4),
    "jsp.special.erf/erfinv": Case(lambda a: (jsp.special.erf(a), jsp.special.erfinv(jnp.tanh(a) * 0.9)), (V,),
                                   tol=1e-4),
    "jsp.special.i0e/i1e": Case(lambda a: (jsp.special.i0e(a), jsp.special.i1e(a)), (V,), tol=1e-4),
    "jsp.special.betainc": Case(lambda a: jsp.special.betainc(2.0, 3.0, jax.nn.sigmoid(a)), (V,), tol=1e-4),
    "jsp.special.logsumexp/xlogy": Case(lambda a: (jsp.special.logsumexp(a), jsp.special.xlogy(a, jnp.abs(a))),
                                        (V,)),
    "jsp.signal.convolve/correlate": Case(lambda a, b: (jsp.signal.convolve(a, b), jsp.signal.correlate(a, b)),
                                          (V, (3,)), tol=1e-4),
    "jsp.stats.norm": Case(lambda a: (jsp.stats.norm.cdf(a), jsp.stats.norm.logpdf(a)), (V,)),
    "jsp.ndimage.map_coordinates": Case(
        lambda a, c: jsp.ndimage.map_coordinates(a, [jnp.abs(c) % 2, jnp.abs(c) % 2], order=1), (M, (4,))),
    # jax.nn
    "nn.relu/gelu/silu": Case(lambda a: (jax.nn.relu(a), jax.nn.gelu(a), jax.nn.silu(a)), (V,)),
    "nn.softmax/log_softmax": Case(lambda a: (jax.nn.softmax(a), jax.nn.log_softmax(a)), (V,)),
    "nn.one_hot": Case(lambda a: jax.nn.one_hot(a, 5), (I32,)),
    "nn.standardize": Case(lambda a: jax.nn.standardize(a), (V,), tol=1e-4),
    "nn.dot_product_attention": Case(lambda q, k, v: jax.nn.dot_product_attention(q, k, v),
                                     ((4, 2, 8), (4, 2, 8), (4, 2, 8)), tol=1e-4),
    # jax.random (new-style keys are extended dtypes inside the body)
    "random.normal/uniform": Case(lambda s: (jax.random.normal(_key(s), (4,)), jax.random.uniform(_key(s), (4,))),
                                  (SEED,)),
    "random.randint/bernoulli": Case(lambda s: (jax.random.randint(_key(s), (4,), 0, 9),
                                                jax.random.bernoulli(_key(s), 0.3, (4,))), (SEED,)),
    "random.permutation/categorical": Case(lambda s: (jax.random.permutation(_key(s), 6),
                                                      jax.random.categorical(_key(s), jnp.zeros(5), shape=(3,))),
                                           (SEED,)),
    "random.split/fold_in(axis_index)": Case(
        lambda s: jax.random.key_data(jax.random.split(jax.random.fold_in(_key(s), lax.axis_index("i")))), (SEED,)),
    "random.PRNGKey(threefry)": Case(lambda s: jax.random.normal(jax.random.PRNGKey(s[0]), (3,)), (SEED,)),
    # lax control flow, custom derivatives, remat, host callbacks
    "lax.scan": Case(lambda a: lax.scan(lambda c, x: (c * 0.9 + x, c), 0.0, a), (V,)),
    "lax.scan(psum)": Case(lambda a: lax.scan(lambda c, x: (c + lax.psum(x, "i"), c), 0.0, a)[0], (V,)),
    "lax.while_loop": Case(lambda a: lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 1.1), (0, a)),
                           (V,)),
    "lax.fori_loop": Case(lambda a: lax.fori_loop(0, 4, lambda k, c: c + k * a, a), (V,)),
    "lax.cond": Case(lambda a: lax.cond(a.sum() > 0, jnp.sin, jnp.cos, a), (V,)),
    "lax.switch": Case(lambda a, k: lax.switch(k[0] % 3, [jnp.sin, jnp.cos, jnp.tanh], a), (V, ((1,), np.int32))),
    "lax.map/associative_scan": Case(lambda a: (lax.map(jnp.sin, a), lax.associative_scan(jnp.add, a)), (V,)),
    "lax.sort(multi)": Case(lambda a, b: lax.sort((a, b), num_keys=1), (V, V)),
    "lax.top_k": Case(lambda a: lax.top_k(a, 3), (V,)),
    "lax.reduce_window/cummax": Case(lambda a: (lax.reduce_window(a, -jnp.inf, lax.max, (2,), (1,), "VALID"),
                                                lax.cummax(a)), (V,)),
    "custom_jvp(grad)": Case(lambda a: jax.grad(lambda x: _softclip(x).sum())(a), (V,)),
    "custom_vjp(grad)": Case(lambda a: jax.grad(lambda x: _scaled(x).sum())(a), (V,)),
    "remat(grad)": Case(lambda a: jax.grad(lambda x: jax.checkpoint(lambda y: jnp.sin(y) ** 2)(x).sum())(a), (V,)),
    "grad(expm)": Case(lambda a: jax.grad(lambda x: jsp.linalg.expm(x * 0.3).sum())(a), (M,), tol=1e-4),
    "grad(searchsorted+interp)": Case(lambda a: jax.grad(lambda x: jnp.interp(x, jnp.linspace(-2, 2, 5),
                                                                              jnp.arange(5.0) ** 2).sum())(a), (V,)),
    "vmap(expm)": Case(lambda a: jax.vmap(lambda m: jsp.linalg.expm(m * 0.3))(a), ((2, 3, 3),), tol=1e-4),
    "jit(searchsorted)": Case(jax.jit(lambda a, v: jnp.searchsorted(jnp.sort(a), v)), (V, (4,))),
    "pure_callback": Case(lambda a: jax.pure_callback(lambda x: np.sin(x), jax.ShapeDtypeStruct(a.shape, a.dtype), a),
                          (V,)),
    "psum(expm)": Case(lambda a: lax.psum(jsp.linalg.expm(a * 0.3), "i"), (M,), tol=1e-4),
}

#: The cases the suite runs on every jax (seconds): one or two per family, and the high-level primitives jax 0.12's
#: library binds (SearchSorted, Nonzero, Frexp) with some functions that reach them (expm, interp).
QUICK = ("jnp.searchsorted", "jnp.frexp/ldexp", "jnp.einsum", "jnp.nonzero(size)", "jnp.interp", "jnp.linalg.solve",
         "jsp.linalg.expm", "jsp.special.gammaln/digamma", "jsp.signal.convolve/correlate", "nn.softmax/log_softmax",
         "random.randint/bernoulli", "lax.scan(psum)", "lax.while_loop", "lax.cond", "custom_vjp(grad)",
         "remat(grad)", "pure_callback")


def compare(got, want, tol: float) -> str | None:
    """What differs between two pytrees of results (None: nothing): integers and booleans exactly."""
    got_leaves, got_tree = jax.tree.flatten(got)
    want_leaves, want_tree = jax.tree.flatten(want)
    if got_tree != want_tree:
        return f"result trees differ: {got_tree} != {want_tree}"
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"result {k}: {g.dtype}{list(g.shape)} != {w.dtype}{list(w.shape)}"
        if np.issubdtype(w.dtype, np.inexact):
            if not np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True):
                return f"result {k}: max difference {np.nanmax(np.abs(g - w))}"
        elif not np.array_equal(g, w):
            return f"result {k}: {np.count_nonzero(g != w)} of {g.size} values differ"
    return None


@dataclasses.dataclass
class Outcome:
    kind: str  # "same", "differs", "pxla fails", "jax fails"
    detail: str = ""


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"


def run_body(name: str, body: Callable, args: list, tol: float = FLOAT_TOL) -> Outcome:
    """``body`` under jax.pmap and pxla_mlir.pmap over axis "i" on ``args``."""
    try:
        want = jax.pmap(body, axis_name="i")(*args)
        jax.block_until_ready(want)
    except Exception as e:  # jax itself cannot run it: nothing to compare with
        return Outcome("jax fails", _error(e))
    try:
        got = pxla_mlir.pmap(body, axis_name="i")(*args)
        jax.block_until_ready(got)
    except Exception as e:
        return Outcome("pxla fails", _error(e))
    problem = compare(got, want, tol)
    return Outcome("same") if problem is None else Outcome("differs", f"{name}: {problem}")


def run_case(name: str) -> Outcome:
    case = CASES[name]
    return run_body(name, case.body, operands(name, case.shapes), case.tol)


# -- --auto: every public function of jax's library modules that takes one or two arrays -----------------

AUTO_MODULES = ("jax.numpy", "jax.numpy.linalg", "jax.numpy.fft", "jax.nn", "jax.scipy.special", "jax.scipy.linalg",
                "jax.scipy.signal", "jax.scipy.stats.norm")
#: Skipped by name: they need more than one array, print, or allocate by a value.
AUTO_SKIP = {"jax.numpy.save", "jax.numpy.load", "jax.numpy.array_repr", "jax.numpy.array_str", "jax.numpy.printoptions",
             "jax.numpy.set_printoptions", "jax.numpy.fromfile", "jax.numpy.fromfunction", "jax.numpy.frompyfunc",
             "jax.numpy.fromiter", "jax.numpy.fromstring", "jax.numpy.from_dlpack", "jax.numpy.vectorize"}


#: What jax.pmap itself kills the process on (a segfault), by jax release: reported as jax's failure, not run.
JAX_CRASHES = {"jax.scipy.signal.detrend": ("0.11.2",)}


def _required_positionals(fn) -> int | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return sum(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def auto_functions():
    """(qualified name, function, how many arrays it takes) of jax's library modules."""
    import importlib

    for module_name in AUTO_MODULES:
        module = importlib.import_module(module_name)
        for attr in sorted(dir(module)):
            qualified = f"{module_name}.{attr}"
            fn = getattr(module, attr)
            if attr.startswith("_") or qualified in AUTO_SKIP or inspect.isclass(fn) or inspect.ismodule(fn) \
                    or not callable(fn):
                continue
            arity = _required_positionals(fn)
            if arity in (1, 2):
                yield qualified, fn, arity


def run_auto(report: Callable[[str, Outcome], None]) -> None:
    args = operands("auto", (M, M))
    for name, fn, arity in auto_functions():
        if jax.__version__ in JAX_CRASHES.get(name, ()):
            report(name, Outcome("jax fails", f"jax.pmap crashes the process on jax {jax.__version__}: not run"))
            continue
        report(name, run_body(name, fn, args[:arity]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--auto", action="store_true", help="also every one-array function of jax's library")
    parser.add_argument("--verbose", action="store_true", help="one line per case that is the same, too")
    args = parser.parse_args(argv)
    counts: dict[str, int] = {}
    start = time.monotonic()

    def report(name: str, outcome: Outcome) -> None:
        counts[outcome.kind] = counts.get(outcome.kind, 0) + 1
        listed = outcome.kind != "same" and not (outcome.kind == "jax fails" and name not in CASES)
        if listed or args.verbose:
            print(f"{outcome.kind:10s} {name}  {outcome.detail}", flush=True)

    print(f"jax {jax.__version__}, {jax.device_count()} devices", flush=True)
    for name in CASES:
        report(name, run_case(name))
    if args.auto:
        run_auto(report)
    print(f"{sum(counts.values())} bodies in {time.monotonic() - start:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 1 if counts.get("pxla fails") or counts.get("differs") else 0


if __name__ == "__main__":
    sys.exit(main())
