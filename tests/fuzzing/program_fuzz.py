"""A seeded differential test: random pmap programs against jax.vmap.

Each program nests 1 to 3 pmaps (axis sizes whose product is at most 8),
maps its input along a random axis at every level (negative axes too) and a
second, broadcast input with ``in_axes=None``, applies random collectives
(psum, pmean, pmax, pmin, all_gather, ppermute with full and partial
permutations, all_to_all, axis_index, also over several axis names) and
returns one value per level with random ``out_axes`` (negative ones, and None
where the value is the same on every device of the axis). pxla_mlir.pmap runs
it on 8 CPU devices in a random mode and unshard strategy; the reference is
the same program with every pmap replaced by ``jax.vmap(..., axis_name=...)``.

    python tests/fuzzing/program_fuzz.py --programs 2000 --seed 1   # what `make fuzz` runs
    python tests/fuzzing/program_fuzz.py --show 1:17                # print one program, run it
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
import random
import sys
import traceback

if __package__ in (None, ""):  # run as a script: make `fuzzing` importable
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from fuzzing import workers

ENV = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
SIZES = ((8,), (4,), (2,), (3,), (5,), (2, 4), (4, 2), (2, 2), (2, 3), (3, 2), (2, 2, 2))
MODES = (("replica", "all-gather"), ("replica", "all-reduce"), ("partition", "all-gather"),
         ("partition", "all-reduce"))
NAMES = ("a", "b", "c")


@dataclasses.dataclass(frozen=True)
class Op:
    kind: str  # psum, pmean, pmax, pmin, all_gather, ppermute, all_to_all, axis_index, tanh, affine, add_w
    names: tuple[str, ...] = ()
    arg: object = None  # ppermute pairs, all_gather/all_to_all dimension, affine factor
    replace: bool = True  # v = op(v), else v = v + op(v)

    def __str__(self) -> str:
        call = f"{self.kind}({', '.join(self.names)}{'' if self.arg is None else f'; {self.arg}'})"
        return f"v = {call}" if self.replace else f"v = v + {call}"


@dataclasses.dataclass(frozen=True)
class Level:
    name: str
    size: int
    in_axis: int
    ops: tuple[Op, ...]
    out_axes: tuple  # one per output: the inner levels' outputs, then this level's value


@dataclasses.dataclass(frozen=True)
class Program:
    levels: tuple[Level, ...]
    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...] | None  # the broadcast input (in_axes=None), if any
    mode: str
    unshard: str

    def __str__(self) -> str:
        w = f", w: f32{list(self.w_shape)} (in_axes=None)" if self.w_shape else ""
        lines = [f"x: f32{list(self.x_shape)}{w}; mode={self.mode} unshard={self.unshard}"]
        for depth, lv in enumerate(self.levels):
            pad = "  " * depth
            lines.append(f"{pad}pmap over {lv.name!r} (size {lv.size}), in_axes={lv.in_axis}, out_axes={lv.out_axes}")
            lines += [f"{pad}  {op}" for op in lv.ops]
        return "\n".join(lines)


# -- generation ---------------------------------------------------------------------------

def _insert(shape: tuple, axis: int, size: int) -> tuple:
    axis = axis % (len(shape) + 1)
    return shape[:axis] + (size,) + shape[axis:]


def make_program(seed: int, index: int) -> Program:
    rng = random.Random(f"program:{seed}:{index}")
    sizes = rng.choice(SIZES)
    names = NAMES[:len(sizes)]
    common = math.lcm(*sizes)
    shapes = [rng.choice(((common,), (common, 3), (2, common)))]  # innermost per-device shape
    in_axes = []
    for size in reversed(sizes):  # each level's input: the next level's shape with its mapped axis inserted
        rank = len(shapes[0]) + 1
        axis = rng.randrange(-rank, rank)
        in_axes.insert(0, axis)
        shapes.insert(0, _insert(shapes[0], axis, size))
    has_w = rng.random() < 0.5
    levels, _, _ = _level(rng, 0, sizes, names, in_axes, shapes, frozenset(), has_w)
    mode, unshard = rng.choice(MODES)
    return Program(tuple(levels), shapes[0], shapes[1] if has_w else None, mode, unshard)


def _level(rng, k, sizes, names, in_axes, shapes, varies, has_w):
    """Level k's spec and the levels inside it, its outputs (shape, axes they may vary over) as its
    caller sees them, and the axis names its body and the levels inside use."""
    shape, name, size = shapes[k + 1], names[k], sizes[k]
    scope = names[:k + 1]
    varies = varies | {name}
    ops = []
    for _ in range(rng.randint(1, 3)):
        op = _op(rng, scope, dict(zip(names, sizes)), shape, has_w and k == 0)
        if op is not None:
            ops.append(op)
            varies = _varies_after(op, varies)
    mentioned = {name, *(n for op in ops for n in op.names)}
    inner, outs = [], []
    if k + 1 < len(sizes):
        inner, inner_outs, inner_mentioned = _level(rng, k + 1, sizes, names, in_axes, shapes, varies, has_w)
        # pxla_mlir's check is conservative about a nested pmap (pxla_mlir/maps/invariance.py): its outputs
        # may vary over whatever its input varies over and every axis its body names.
        outs = [(out_shape, varies | inner_mentioned) for out_shape, _ in inner_outs]
        mentioned |= inner_mentioned
    outs = outs + [(shape, varies)]
    out_axes, mapped = [], []
    for out_shape, out_varies in outs:
        if name not in out_varies and rng.random() < 0.5:
            out_axes.append(None)
            mapped.append((out_shape, out_varies))
        else:
            rank = len(out_shape) + 1
            axis = rng.randrange(-rank, rank)
            out_axes.append(axis)
            mapped.append((_insert(out_shape, axis, size), out_varies - {name}))
    return [Level(name, size, in_axes[k], tuple(ops), tuple(out_axes)), *inner], mapped, mentioned


def _op(rng, scope, sizes, shape, can_add_w) -> Op | None:
    kinds = ["psum", "pmean", "pmax", "pmin", "all_gather", "ppermute", "all_to_all", "axis_index", "tanh", "affine"]
    kind = rng.choice(kinds + ["add_w"] * 2 * can_add_w)
    replace = rng.random() < 0.5
    one = (rng.choice(scope),)
    several = tuple(sorted(rng.sample(scope, rng.randint(1, len(scope))), key=scope.index))
    if kind in ("psum", "pmean", "pmax", "pmin"):
        return Op(kind, several, None, replace)
    if kind == "axis_index":
        return Op(kind, several if rng.random() < 0.3 else one, None, False)
    if kind == "all_gather":
        return Op(kind, one, rng.randrange(len(shape) + 1), replace)
    if kind == "ppermute":
        n = sizes[one[0]]
        shift = rng.randrange(1, n) if n > 1 else 0
        sources = range(n) if rng.random() < 0.7 else sorted(rng.sample(range(n), rng.randint(1, n)))
        return Op(kind, one, tuple((i, (i + shift) % n) for i in sources), replace)
    if kind == "all_to_all":
        dims = [d for d, s in enumerate(shape) if s % sizes[one[0]] == 0]
        return Op(kind, one, rng.choice(dims), replace) if dims else None
    if kind == "affine":
        return Op(kind, (), rng.choice((0.5, -1.5, 2.0)), False)
    return Op(kind, (), None, kind == "tanh" and replace)


def _varies_after(op: Op, varies: frozenset) -> frozenset:
    """Which axes the value may vary over after ``op`` (as conservative as pxla_mlir's check)."""
    if op.kind in ("psum", "pmean", "pmax", "pmin", "all_gather"):
        reduced = varies - set(op.names)
        return varies if not op.replace else reduced  # v + psum(v) still varies like v
    if op.kind in ("ppermute", "all_to_all", "axis_index"):
        return varies | set(op.names)
    return varies


# -- running ----------------------------------------------------------------------------------

def build(program: Program, mapper, *, reference: bool = False):
    """The program as a function of (x[, w]), every pmap made by ``mapper(f, level, top)``.
    ``reference``: written for jax.vmap, which has no partial ppermute."""
    import jax.numpy as jnp
    from jax import lax

    def all_to_all_by_gather(v, name, split, concat, tiled):
        """all_to_all from all_gather: jax.vmap's own rule gets the shape wrong for an
        outer axis name and for a value not batched along it."""
        assert split == concat and tiled
        size, shape = lax.axis_size(name), v.shape
        g = lax.all_gather(v, name).reshape(size, *shape[:split], size, shape[split] // size, *shape[split + 1:])
        mine = jnp.take(g, lax.axis_index(name), axis=split + 1)  # my chunk from every device, in device order
        return jnp.moveaxis(mine, 0, split).reshape(shape)

    def ppermute(v, name, pairs):
        if not reference:
            return lax.ppermute(v, name, pairs)
        n = lax.axis_size(name)
        sources, targets = {a for a, _ in pairs}, {b for _, b in pairs}
        full = list(pairs) + list(zip(sorted(set(range(n)) - sources), sorted(set(range(n)) - targets)))
        receives = jnp.isin(lax.axis_index(name), jnp.array(sorted(targets)))
        return jnp.where(receives, lax.ppermute(v, name, full), jnp.zeros_like(v))

    def apply(op: Op, v, w):
        n = op.names[0] if op.names else None
        if op.kind in ("psum", "pmean", "pmax", "pmin"):
            out = getattr(lax, op.kind)(v, op.names)
        elif op.kind == "all_gather":
            g = lax.all_gather(v, n, axis=op.arg)
            weights = jnp.arange(1, g.shape[op.arg] + 1, dtype=v.dtype)
            out = jnp.tensordot(weights, jnp.moveaxis(g, op.arg, 0), axes=1)  # order matters
        elif op.kind == "ppermute":
            out = ppermute(v, n, list(op.arg))
        elif op.kind == "all_to_all":
            out = (all_to_all_by_gather if reference else lax.all_to_all)(v, n, op.arg, op.arg, tiled=True)
        elif op.kind == "axis_index":
            index = lax.axis_index(op.names if len(op.names) > 1 else n)
            out = (index + 1).astype(v.dtype) * jnp.ones_like(v)
        elif op.kind == "tanh":
            out = jnp.tanh(v)
        elif op.kind == "affine":
            out = v * op.arg
        else:  # add_w
            out = w
        return out if op.replace else v + out

    def level_fn(k):
        lv = program.levels[k]

        def body(v, w=None):
            for op in lv.ops:
                v = apply(op, v, w)
            outs = ()
            if k + 1 < len(program.levels):
                outs = mapper(level_fn(k + 1), program.levels[k + 1], False)(v)
            return (*outs, v)

        return body

    return mapper(level_fn(0), program.levels[0], True)


def run_pxla(program: Program, x, w):
    import pxla_mlir

    def mapper(f, lv: Level, top: bool):
        in_axes = (lv.in_axis, None) if top and w is not None else lv.in_axis
        options = dict(mode=program.mode, unshard=program.unshard) if top else {}
        return pxla_mlir.pmap(f, lv.name, in_axes=in_axes, out_axes=lv.out_axes, **options)

    fn = build(program, mapper)
    return fn(x, w) if w is not None else fn(x)


def run_reference(program: Program, x, w):
    """Nested jax.vmap; an out_axes=None output is the slice at index 0 of the stacked one."""
    import jax

    def mapper(f, lv: Level, top: bool):
        in_axes = (lv.in_axis, None) if top and w is not None else lv.in_axis
        stacked = jax.vmap(f, in_axes=in_axes, out_axes=tuple(0 if a is None else a for a in lv.out_axes),
                           axis_name=lv.name)

        def call(*args):
            return tuple(o[0] if a is None else o for o, a in zip(stacked(*args), lv.out_axes))

        return call

    fn = build(program, mapper, reference=True)
    return fn(x, w) if w is not None else fn(x)


def check(seed: int, index: int) -> tuple[str, str | None, str]:
    """Runs one program both ways and compares (see workers.py)."""
    import numpy as np

    program = make_program(seed, index)
    rng = np.random.default_rng([seed, index])
    x = rng.normal(size=program.x_shape).astype(np.float32)
    w = rng.normal(size=program.w_shape).astype(np.float32) if program.w_shape else None
    text = str(program)
    try:
        want = [np.asarray(o) for o in run_reference(program, x, w)]
    except Exception as e:  # a program jax itself rejects is a bug of the generator
        return "", f"reference failed: {type(e).__name__}: {e}", text
    try:
        got = run_pxla(program, x, w)
    except Exception as e:
        return "", f"pxla_mlir failed: {type(e).__name__}: {e}", text + "\n" + traceback.format_exc(limit=-3)
    if len(got) != len(want):
        return "", f"{len(got)} outputs, the reference has {len(want)}", text
    for i, (g, r) in enumerate(zip(got, want)):
        g = np.asarray(g)
        if g.shape != r.shape:
            return "", f"output {i} has shape {g.shape}, the reference {r.shape}", text
        if not np.allclose(g, r, rtol=1e-4, atol=1e-4):
            worst = float(np.max(np.abs(g - r)))
            return "", f"output {i} differs from the reference by up to {worst:.3g}", text
    return "match", None, text


def run(seed: int, count: int, *, workers_count: int = 2) -> workers.Report:
    return workers.run("fuzzing.program_fuzz", seed, list(range(count)), workers=workers_count, timeout=300, env=ENV,
                       batch=40)


def main(argv=None) -> int:
    return workers.seeded_main(argv, doc=__doc__, title="random pmap programs against jax.vmap",
                               count_flag="programs", default_count=2000,
                               show_help="print one program and check it in this process", check=check, run=run,
                               env=ENV, label="program", shown=lambda lines: lines[:12])

if __name__ == "__main__":
    sys.exit(main())
