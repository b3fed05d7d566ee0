"""What the command line points at: ``module:function`` or ``file.py:function``,
argument shapes like ``f32[8,128]``, and the example inputs a function may
declare so that ``pxla-mlir emit`` needs no flags::

    @pxla_mlir.example_args("f32[8,128]", "i32[8]")
    @pxla_mlir.pmap(axis_name="i")
    def step(x, y): ...

    @pxla_mlir.example_args("f32[4,8,3]", mesh="2x4:x,y")
    def f(b): ...   # an xmap-ed function with its mesh
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pxla_mlir.errors import PxlaUserError

__all__ = ["TargetError", "ArgSpec", "parse_arg", "parse_mesh", "resolve", "example_args", "Examples",
           "literal"]


class TargetError(PxlaUserError, ValueError):
    """A target, shape or option the command line cannot use; one line, no traceback."""


DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16",
          "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
          "bool": "bool", "pred": "bool", "c64": "complex64", "c128": "complex128"}
_ARG = re.compile(r"^\s*([a-z]+\d*)\s*\[([^\]]*)\]\s*$")
_DIM = re.compile(r"^\s*(\d+)\s*$")


@dataclasses.dataclass(frozen=True)
class ArgSpec:
    dtype: str  # numpy/jax dtype name
    shape: tuple[int, ...]

    def struct(self):
        import jax
        import jax.numpy as jnp

        return jax.ShapeDtypeStruct(self.shape, jnp.dtype(self.dtype))

    def random(self, rng: np.random.Generator):
        import jax.numpy as jnp

        dt = jnp.dtype(self.dtype)
        if dt == jnp.bool_:
            return rng.integers(0, 2, size=self.shape).astype(bool)
        if jnp.issubdtype(dt, jnp.integer):
            return rng.integers(0, 10, size=self.shape).astype(dt)
        if jnp.issubdtype(dt, jnp.complexfloating):  # a zero imaginary part would hide errors in it
            return (rng.normal(size=self.shape) + 1j * rng.normal(size=self.shape)).astype(dt)
        return rng.normal(size=self.shape).astype(dt)

    def __str__(self) -> str:
        short = {v: k for k, v in DTYPES.items() if k != "pred"}
        return f"{short.get(self.dtype, self.dtype)}[{','.join(map(str, self.shape))}]"


def parse_arg(text: str) -> ArgSpec:
    """``f32[8,128]``, ``i32[]`` (a scalar), ``bool[3]``; jax's dtype names too (``float32[8,128]``)."""
    m = _ARG.match(text)
    if not m or m.group(1) not in DTYPES and m.group(1) not in DTYPES.values():
        raise TargetError(f"bad argument shape {text!r}: expected dtype[dims] like f32[8,128], float32[8,128] or "
                          f"i32[] (dtypes: {', '.join(sorted(DTYPES))}, or jax's names: "
                          f"{', '.join(sorted(set(DTYPES.values())))})")
    inside = m.group(2)
    dims = [] if not inside.strip() else inside.split(",")
    for d in dims:
        if not _DIM.match(d):
            what = "a dimension is empty" if not d.strip() else f"dimension {d.strip()!r} is not a non-negative integer"
            raise TargetError(f"bad argument shape {text!r}: {what} (write dims as comma-separated integers, "
                              f"like f32[8,128])")
    return ArgSpec(DTYPES.get(m.group(1), m.group(1)), tuple(int(d) for d in dims))


def parse_mesh(text: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """``2x4:x,y`` -> ((2, 4), ('x', 'y'))."""
    m = re.fullmatch(r"\s*(\d+(?:x\d+)*)\s*:\s*([\w,\s]+)", text)
    if not m:
        raise TargetError(f"bad mesh {text!r}: expected sizes and names like 2x4:x,y")
    sizes = tuple(int(s) for s in m.group(1).split("x"))
    names = tuple(n.strip() for n in m.group(2).split(","))
    if not all(sizes):
        raise TargetError(f"bad mesh {text!r}: every mesh axis needs a positive size, got {'x'.join(map(str, sizes))}")
    if len(sizes) != len(names) or not all(names):
        raise TargetError(f"bad mesh {text!r}: {len(sizes)} sizes for {len(names)} names")
    return sizes, names


def literal(text: str, what: str):
    """A Python literal from the command line (``(0, None)``, ``['batch', ...]``, ``{'b': 'x'}``)."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise TargetError(f"{what} must be a Python literal like (0, None) or {{'batch': 'x'}}, got {text!r}") from None


def _check_utf8_path(path: str) -> None:
    """jax records source file names in MLIR locations, which must be UTF-8
    (a file under a non-UTF-8 directory makes jaxlib throw std::bad_cast)."""
    path = os.path.abspath(path)
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = os.fsencode(path).decode("utf-8", "backslashreplace")
        raise TargetError(f"bad target: the path '{shown}' is not UTF-8, and jax cannot record such file names in "
                          f"MLIR locations; rename the directory (or move the file) to a UTF-8 name") from None


def _on_path(directory: str) -> None:
    """Imports look in ``directory`` first, as ``python -m``/``python file.py`` would."""
    directory = os.path.abspath(directory)
    if directory not in (os.path.abspath(p or os.curdir) for p in sys.path):
        sys.path.insert(0, directory)


def resolve(target: str) -> Callable:
    """``package.module:function`` or ``path/to/file.py:function`` (dotted
    attributes allowed after the colon). Modules are found in the current
    directory first (as ``python -m`` does), a file's own imports in its
    directory (as ``python file.py`` does)."""
    where, sep, attr = target.rpartition(":")
    if not sep or not where or not attr:
        raise TargetError(f"bad target {target!r}: expected module:function or path/to/file.py:function "
                          f"(pxla-mlir run also takes a module file, FILE.mlir)")
    if where.endswith(".py") or os.sep in where:
        if not os.path.isfile(where):
            raise TargetError(f"bad target {target!r}: no such file {where!r}")
        _check_utf8_path(where)
        _on_path(os.path.dirname(where))
        name = "_pxla_target_" + re.sub(r"\W", "_", os.path.abspath(where))
        spec = importlib.util.spec_from_file_location(name, where)
        if spec is None or spec.loader is None:  # a suffix no import machinery reads
            raise TargetError(f"bad target {target!r}: {where!r} is not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec_loader = spec.loader
        loader = lambda: spec_loader.exec_module(module)  # noqa: E731
    else:
        module = None
        _on_path(os.curdir)
        loader = lambda: importlib.import_module(where)  # noqa: E731
    try:
        loaded = loader()
    except ModuleNotFoundError as e:
        raise TargetError(f"bad target {target!r}: cannot import {where!r} ({e})") from None
    except Exception as e:  # the user's module failed while importing
        raise TargetError(f"importing {where!r} failed: {type(e).__name__}: {e}") from None
    loaded_file = getattr(loaded, "__file__", None)
    if module is None and loaded_file:
        _check_utf8_path(loaded_file)
    obj: Any = module if module is not None else loaded
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise TargetError(f"bad target {target!r}: {where!r} has no attribute {part!r}")
        obj = getattr(obj, part)
    if isinstance(obj, type) or not callable(obj):
        kind = "a class" if isinstance(obj, type) else f"a {type(obj).__name__}"
        raise TargetError(f"bad target {target!r}: {attr!r} is {kind}, not a function; point at the function "
                          f"to map (or a pxla_mlir.pmap/xmap of it)")
    return obj


@dataclasses.dataclass(frozen=True)
class Examples:
    """Example inputs a function declares for ``pxla-mlir emit``/``run``."""

    args: tuple[ArgSpec, ...]
    mesh: str | None = None


def example_args(*shapes: str, mesh: str | None = None):
    """Declares example argument shapes (and the mesh for an xmap) for the CLI."""
    specs = tuple(parse_arg(s) for s in shapes)
    if mesh is not None:
        parse_mesh(mesh)

    def attach(fn):
        fn.__pxla_examples__ = Examples(specs, mesh)
        return fn

    return attach


def examples_of(fn) -> Examples | None:
    seen = set()
    while fn is not None and id(fn) not in seen:
        seen.add(id(fn))
        ex = getattr(fn, "__pxla_examples__", None)
        if ex is not None:
            return ex
        fn = getattr(fn, "__wrapped__", None)
    return None


def arg_specs(texts: Sequence[str]) -> tuple[ArgSpec, ...]:
    return tuple(parse_arg(t) for t in texts)
