"""Typed options for passes and pipelines, in MLIR's textual syntax.

Options are dataclass fields declared with :func:`option`. On the command line
they are written in kebab case inside braces, space separated, lists comma
separated: ``pxla-foo{mode=replica groups=0,1,2 verbose}``. A bare name sets a
bool to true. A value holding spaces, commas, braces or quotes is quoted as
mlir-opt quotes it, with ``"..."``, ``'...'`` or ``{...}`` (one level is taken
off, and printing quotes it again). Unknown names and malformed values raise
:class:`OptionError` listing what is valid.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any, Literal

from pxla_mlir.errors import PxlaUserError
from pxla_mlir.mlir.support.suggest import did_you_mean

__all__ = ["OptionError", "option", "option_fields", "check_types", "parse_options", "format_options",
           "split_top_level", "choices", "configure", "quoted", "unquoted"]


class OptionError(PxlaUserError, ValueError):
    """A malformed or unknown option; the message says which and what is valid."""


def option(default: Any, help: str, *, api_name: str | None = None, minimum: int | None = None,
           maximum: int | None = None) -> Any:
    """Declares a pass's option, as a dataclass field:
    ``strategy: Literal["a", "b"] = option("a", "how to ...")``. Its type is
    the field's annotation (``bool``, ``int``, ``float``, ``str``, a
    ``Literal`` of strings, or a ``tuple`` of one of those); its name on the
    command line is the field's in kebab case (``-my-pass='some-field=3'``).
    ``api_name`` is the keyword the Python API calls it by, if not the
    field's name; integer options optionally give the range they accept."""
    if isinstance(default, list):
        default = tuple(default)
    return dataclasses.field(default=default, metadata={"help": help, "api_name": api_name,
                                                        "range": (minimum, maximum)})


@dataclasses.dataclass(frozen=True)
class OptionInfo:
    name: str  # kebab case, as written on the command line
    field: str  # the dataclass field
    type: Any
    default: Any
    help: str
    api_name: str | None = None
    range: tuple[int | None, int | None] = (None, None)

    def type_name(self) -> str:
        t = self.type
        if typing.get_origin(t) is Literal:
            return "|".join(typing.get_args(t))
        if typing.get_origin(t) is tuple:
            return f"list of {typing.get_args(t)[0].__name__}"
        return t.__name__


def option_fields(cls) -> list[OptionInfo]:
    return list(_option_fields(cls))


#: The types an option may have (and tuples of them, a list on the command line).
SUPPORTED = "bool, int, float, str, a Literal of strings, or a tuple of one of those (tuple[int, ...])"


def check_types(cls) -> None:
    """Raises :class:`OptionError` for an option whose type text cannot give (a dict, a class of one's own)."""
    for info in option_fields(cls):
        if not _supported(info.type, outer=True):
            raise OptionError(f"option '{info.name}' has type {getattr(info.type, '__name__', info.type)!s}, "
                              f"which pipeline text cannot give: declare it as {SUPPORTED}")


def _supported(t: Any, *, outer: bool) -> bool:
    if t in (bool, int, float, str):
        return True
    if typing.get_origin(t) is Literal:
        return all(isinstance(a, str) for a in typing.get_args(t))
    if outer and typing.get_origin(t) is tuple:
        args = typing.get_args(t)
        return len(args) == 2 and args[1] is Ellipsis and _supported(args[0], outer=False)
    return False


@functools.cache
def _option_fields(cls) -> tuple[OptionInfo, ...]:
    """Read once per class: resolving the type hints costs milliseconds, and
    every ``pmap(...)`` configures its pipeline."""
    hints = typing.get_type_hints(cls, include_extras=False)
    out = []
    for f in dataclasses.fields(cls):
        if "help" not in f.metadata:
            continue
        out.append(OptionInfo(f.name.replace("_", "-"), f.name, hints[f.name], f.default, f.metadata["help"],
                              f.metadata.get("api_name"), f.metadata.get("range", (None, None))))
    return tuple(out)


def split_top_level(text: str, sep: str) -> list[str]:
    """Splits on ``sep`` outside (), {}, [] and quotes; ``sep=" "`` splits on any whitespace."""
    parts, depth, cur, quote = [], 0, [], None
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        is_sep = ch.isspace() if sep == " " else ch == sep
        if is_sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()] if sep == " " else [p.strip() for p in parts]


def _convert(info: OptionInfo, raw: str, owner: str) -> Any:
    t = info.type

    def bad(expected: str) -> OptionError:
        return OptionError(f"{owner}: option '{info.name}' expects {expected}, got '{raw}'")

    if t is bool:
        low = raw.lower()
        if low in ("true", "1"):
            return True
        if low in ("false", "0"):
            return False
        raise bad("true or false")
    if t is int:
        try:
            value = int(raw, 0)
        except ValueError:
            raise bad("an integer") from None
        low, high = info.range
        if (low is not None and value < low) or (high is not None and value > high):
            raise bad(f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}")
        return value
    if t is float:
        try:
            return float(raw)
        except ValueError:
            raise bad("a number") from None
    if t is str:
        return unquoted(raw)
    if typing.get_origin(t) is Literal:
        choices = typing.get_args(t)
        if raw not in choices:
            raise bad("one of " + ", ".join(choices))
        return raw
    if typing.get_origin(t) is tuple:
        elem = typing.get_args(t)[0]
        items = [] if raw == "" else split_top_level(raw, ",")
        sub = dataclasses.replace(info, type=elem)
        return tuple(_convert(sub, item, owner) for item in items)
    raise TypeError(f"unsupported option type {t!r} for {owner}:{info.name}")


def parse_options(cls, text: str, owner: str) -> dict[str, Any]:
    """Parses ``a=1 b=x,y flag`` (the inside of the braces) into field values."""
    infos = {i.name: i for i in option_fields(cls)}
    values: dict[str, Any] = {}
    for item in split_top_level(text, " "):
        key, eq, raw = item.partition("=")
        info = infos.get(key)
        if info is None:
            valid = ", ".join(sorted(infos)) if infos else "none"
            hint = f" (did you mean '{key.replace('_', '-')}'?)" if key.replace("_", "-") in infos else ""
            raise OptionError(f"{owner}: unknown option '{key}'{hint}; valid options: {valid}")
        if not eq:
            if info.type is not bool:
                raise OptionError(f"{owner}: option '{key}' needs a value ({key}=<{info.type_name()}>)")
            raw = "true"
        if info.field in values:
            raise OptionError(f"{owner}: option '{key}' given twice")
        values[info.field] = _convert(info, raw, owner)
    return values


def unquoted(raw: str) -> str:
    """A value without the one level of quotes (``"..."``, ``'...'``, ``{...}``) that may wrap it, as MLIR's
    option parser takes it off."""
    if len(raw) >= 2 and (raw[0], raw[-1]) in (('"', '"'), ("'", "'"), ("{", "}")):
        return raw[1:-1]
    return raw


#: Characters that end or split a bare value in option text.
_SPECIAL = frozenset(" \t\n\r\f\v,{}()[]\"'=")


def quoted(text: str) -> str:
    """``text`` as an option value that reads back as ``text``: bare where it can be, else quoted."""
    if text and not _SPECIAL.intersection(text):
        return text
    for open_, close in (('"', '"'), ("'", "'")):
        if open_ not in text:
            return f"{open_}{text}{close}"
    if _balanced(text):
        return "{" + text + "}"
    raise OptionError(f"the value {text!r} holds both kinds of quote and unbalanced braces: it cannot be written "
                      f"as an option value")


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            return False
    return depth == 0


def _format_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple):
        return ",".join(_format_value(x) for x in v)
    if isinstance(v, str):
        return quoted(v)
    return str(v)


def format_options(obj) -> str:
    """``{a=1 b=x,y}`` with every option in declaration order, or "" if none."""
    infos = option_fields(type(obj))
    if not infos:
        return ""
    return "{" + " ".join(f"{i.name}={_format_value(getattr(obj, i.field))}" for i in infos) + "}"


def _info(cls, name: str) -> OptionInfo | None:
    return next((i for i in option_fields(cls) if name in (i.name, i.field, i.api_name)), None)


def _choice_info(cls, name: str) -> OptionInfo:
    info = _info(cls, name)
    if info is None or typing.get_origin(info.type) is not Literal:
        raise KeyError(f"{cls.__name__} has no choice option {name!r}")
    return info


def choices(cls, name: str) -> tuple[str, ...]:
    """The values a ``Literal`` option of ``cls`` accepts (``name`` in kebab or snake case, or its API name)."""
    return typing.get_args(_choice_info(cls, name).type)


def _one_of(values: tuple) -> str:
    quoted = [repr(v) for v in values]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def configure(cls, **values):
    """``cls(**values)`` for Python callers (keywords: fields or API names), with
    each choice checked: ``OptionError("mode must be 'replica' or 'partition', got 'spmd'")``
    (a ``ValueError``). Given an instance instead of a class, its other options are kept."""
    fields = {}
    if not isinstance(cls, type):
        fields = {i.field: getattr(cls, i.field) for i in option_fields(type(cls))}
        cls = type(cls)
    for name, value in values.items():
        info = _choice_info(cls, name)
        allowed = typing.get_args(info.type)
        if value not in allowed:
            raise OptionError(f"{name} must be {_one_of(allowed)}, got {value!r}{did_you_mean(str(value), allowed)}")
        fields[info.field] = value
    return cls(**fields)
