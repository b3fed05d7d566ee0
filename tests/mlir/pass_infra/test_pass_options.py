"""Typed options: parsing, printing, errors that list what is valid."""

import dataclasses
from typing import Literal

import pytest

from pxla_mlir.mlir.pass_infra import ModulePass, option
from pxla_mlir.mlir.pass_infra.options import OptionError, split_top_level


@dataclasses.dataclass(frozen=True)
class Demo(ModulePass):
    argument = "pxla-demo"
    summary = "demo"
    count: int = option(3, "a count")
    ratio: float = option(0.5, "a ratio")
    name: str = option("x", "a name")
    flag: bool = option(False, "a flag")
    mode: Literal["fast", "slow"] = option("fast", "a mode")
    groups: tuple[int, ...] = option((), "ids")
    axes: tuple[str, ...] = option(("i",), "names")


def test_defaults_and_spec():
    d = Demo.from_options("")
    assert d == Demo()
    assert d.spec() == "pxla-demo{count=3 ratio=0.5 name=x flag=false mode=fast groups= axes=i}"


def test_kebab_case_values_and_lists():
    d = Demo.from_options("count=0x10 flag mode=slow groups=0,1,2 axes=x,y name='a b'")
    assert (d.count, d.flag, d.mode, d.groups, d.axes, d.name) == (16, True, "slow", (0, 1, 2), ("x", "y"), "a b")


def test_spec_round_trips():
    d = Demo.from_options("count=7 flag=true groups=4,5 axes=p,q ratio=2.5")
    text = d.spec()
    inner = text[len("pxla-demo{"):-1]
    assert Demo.from_options(inner) == d


@pytest.mark.parametrize("text, message", [
    ("bogus=1", "pxla-demo: unknown option 'bogus'; valid options: axes, count, flag, groups, mode, name, ratio"),
    ("group_s=1", "unknown option 'group_s'"),
    ("count=abc", "option 'count' expects an integer, got 'abc'"),
    ("ratio=fast", "option 'ratio' expects a number"),
    ("flag=maybe", "option 'flag' expects true or false"),
    ("mode=medium", "option 'mode' expects one of fast, slow, got 'medium'"),
    ("groups=1,x", "option 'groups' expects an integer, got 'x'"),
    ("count", "option 'count' needs a value (count=<int>)"),
    ("count=1 count=2", "option 'count' given twice"),
])
def test_errors(text, message):
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Demo.from_options(text)


@dataclasses.dataclass(frozen=True)
class Snake(ModulePass):
    argument = "pxla-snake"
    summary = "s"
    max_count: int = option(1, "m")


def test_snake_case_hint():
    assert Snake.from_options("max-count=2").max_count == 2
    with pytest.raises(OptionError, match=r"unknown option 'max_count' \(did you mean 'max-count'\?\)"):
        Snake.from_options("max_count=2")


def test_split_top_level_respects_nesting():
    assert split_top_level("a{b=1,2},c(d,e),f", ",") == ["a{b=1,2}", "c(d,e)", "f"]
    assert split_top_level("x=1  y='a b' z={p q}", " ") == ["x=1", "y='a b'", "z={p q}"]


def test_configure_names_the_choice_spelled_like_a_misspelled_value():
    from pxla_mlir.mlir.pass_infra.options import configure

    with pytest.raises(OptionError, match=r"^mode must be 'fast' or 'slow', got 'slwo'; did you mean 'slow'\?$"):
        configure(Demo, mode="slwo")
    with pytest.raises(OptionError, match=r"^mode must be 'fast' or 'slow', got 'quick'$"):
        configure(Demo, mode="quick")
