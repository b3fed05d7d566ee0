"""Checked readers of MLIR attributes, the pxla form's and XLA's (jax-free).

Each reader checks an attribute's kind and range and raises
:class:`PassError` located at the op that carries it, naming the attribute
and what it should be. :mod:`.pxla_attrs` builds the pxla form's readers on
these and re-exports them, so passes keep one import for every attribute.
"""

from __future__ import annotations

from typing import Any, overload

import numpy as np
from jaxlib.mlir import ir

from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.core.diagnostics import PassError

__all__ = ["CALL_TARGET_NAME", "CHANNEL_HANDLE", "MAX_I32", "MAX_I64", "boundary_attrs", "custom_call_target",
           "function_type", "kind_error", "read_channel_handle", "read_int", "read_int_matrix", "read_str",
           "require_int",
           "string_list", "string_value"]

CHANNEL_HANDLE = "channel_handle"
CALL_TARGET_NAME = "call_target_name"
#: Largest device count or stride a module can state (XLA's counts are i32).
MAX_I32 = 2**31 - 1
MAX_I64 = 2**63 - 1

#: Where a diagnostic points: an op, a value or a location (see ``pass_infra.base.location``).
Where = Any


def kind_error(where: Where, name: str, expected: str, attr: ir.Attribute | None) -> PassError:
    return PassError(where, f"{name} must be {expected}, got {attr}")


@overload
def read_int(op: ir.Operation, name: str, default: int, *, minimum: int | None = None,
             maximum: int | None = MAX_I32) -> int: ...
@overload
def read_int(op: ir.Operation, name: str, default: None = None, *, minimum: int | None = None,
             maximum: int | None = MAX_I32) -> int | None: ...
def read_int(op: ir.Operation, name: str, default: int | None = None, *, minimum: int | None = None,
             maximum: int | None = MAX_I32) -> int | None:
    """An integer attribute of ``op`` (``default`` if absent), range-checked."""
    if name not in op.attributes:
        return default
    attr = op.attributes[name]
    if not isinstance(attr, ir.IntegerAttr) or _is_bool(ir.IntegerAttr(attr).type):
        raise kind_error(op, name, "an integer attribute (e.g. 4 : i64)", attr)
    value = ir.IntegerAttr(attr).value
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        bounds = f"at least {minimum}" if maximum is None else f"between {minimum} and {maximum}"
        raise PassError(op, f"{name} must be {bounds}, got {value}")
    return value


def require_int(op: ir.Operation, name: str, *, minimum: int | None = None, maximum: int | None = MAX_I32) -> int:
    """An integer attribute ``op`` must have, range-checked."""
    value = read_int(op, name, minimum=minimum, maximum=maximum)
    if value is None:
        raise PassError(op, f"{op.name} needs {name} (an integer attribute, e.g. {name} = 4 : i64)")
    return value


def _is_bool(t: ir.Type) -> bool:
    return isinstance(t, ir.IntegerType) and ir.IntegerType(t).width == 1


@overload
def read_str(op: ir.Operation, name: str, default: str) -> str: ...
@overload
def read_str(op: ir.Operation, name: str, default: None = None) -> str | None: ...
def read_str(op: ir.Operation, name: str, default: str | None = None) -> str | None:
    if name not in op.attributes:
        return default
    return string_value(op.attributes[name], name, op)


def string_value(attr: ir.Attribute, name: str, where: Where) -> str:
    if not isinstance(attr, ir.StringAttr):
        raise kind_error(where, name, "a string", attr)
    return ir.StringAttr(attr).value


def string_list(attr: ir.Attribute, name: str, where: Where) -> list[str]:
    if not isinstance(attr, ir.ArrayAttr):
        raise kind_error(where, name, "an array of strings (e.g. [\"x\", \"y\"])", attr)
    return [string_value(a, f"each entry of {name}", where) for a in ir.ArrayAttr(attr)]


def read_int_matrix(op: ir.Operation, name: str) -> np.ndarray:
    """A 2-d integer elements attribute (``replica_groups``, ``source_target_pairs``)."""
    if name not in op.attributes:
        raise PassError(op, f"{op.name} has no {name}")
    attr = op.attributes[name]
    if not isinstance(attr, ir.DenseIntElementsAttr) or ir.ShapedType(attr.type).rank != 2:
        error = kind_error(op, name, "a 2-d integer elements attribute (e.g. dense<[[0, 1]]> : tensor<1x2xi64>)",
                            attr)
        if "replica_group_mesh_axes" in str(attr):  # jax 0.11+ under Shardy: groups named by mesh axes
            error = PassError(op, f"{error.message}; groups given as mesh axes are not read yet: lower the program "
                                  f"with jax.config.update('jax_use_rgv3', False) to get device groups")
        raise error
    return ir_utils.dense_to_numpy(attr)


def read_channel_handle(op: ir.Operation) -> int | None:
    """The handle of an op's ``channel_handle``, or None where it has none."""
    if CHANNEL_HANDLE not in op.attributes:
        return None
    from jaxlib.mlir.dialects import mhlo

    attr = op.attributes[CHANNEL_HANDLE]
    try:
        return mhlo.ChannelHandle(attr).handle
    except ValueError:
        raise kind_error(op, CHANNEL_HANDLE, "#mhlo.channel_handle<handle = N, type = T>", attr) from None


def custom_call_target(op: ir.Operation) -> str | None:
    """The ``call_target_name`` of an ``mhlo.custom_call`` (None for other ops)."""
    if op.name != "mhlo.custom_call" or CALL_TARGET_NAME not in op.attributes:
        return None
    return string_value(op.attributes[CALL_TARGET_NAME], CALL_TARGET_NAME, op)


def function_type(fn: ir.Operation) -> ir.FunctionType:
    attr = fn.attributes.get("function_type")
    if not isinstance(attr, ir.TypeAttr) or not isinstance(ir.TypeAttr(attr).value, ir.FunctionType):
        raise kind_error(fn, "function_type", "a function type", attr)
    return ir.FunctionType(ir.TypeAttr(attr).value)


def boundary_attrs(fn: ir.Operation, key: str) -> list[dict[str, ir.Attribute]]:
    """``arg_attrs`` or ``res_attrs`` of a function as one dict per argument
    or result (empty dicts where the function has none)."""
    ftype = function_type(fn)
    count = len(ftype.inputs if key == "arg_attrs" else ftype.results)
    if key not in fn.attributes:
        return [{} for _ in range(count)]
    attr = fn.attributes[key]
    expected = f"an array of {count} dictionaries"
    if not isinstance(attr, ir.ArrayAttr) or len(ir.ArrayAttr(attr)) != count:
        raise kind_error(fn, key, expected, attr)
    if not all(isinstance(d, ir.DictAttr) for d in ir.ArrayAttr(attr)):
        raise kind_error(fn, key, expected, attr)
    return [{a.name: a.attr for a in ir.DictAttr(d)} for d in ir.ArrayAttr(attr)]
