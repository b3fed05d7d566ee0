"""A PartitionSpec read from text is the spec jax's own PartitionSpec makes of it, in every form it is written:
jax's reprs, the docs' examples, bare tuples and the plain x,y form."""

from __future__ import annotations

import jax
import pytest
from jax.sharding import PartitionSpec

from pxla_mlir.mlir.sharding.pspec_text import UNCONSTRAINED, PartitionSpecSyntaxError, parse

#: Specs as jax writes them (repr), as the docs write them, and as a Python user writes them.
PYTHON_FORMS = [
    "P('x', None)", "P(('x', 'y'),)", "P(None, 'x')", "P('x',)", "P()", "P(None,)", "P(None)", "P('x', 'y')",
    'P("data", None, "model")', "P(None, \"model\")", "PartitionSpec(('x', 'y'),)", "PartitionSpec(None, ('x', 'y'))",
    "jax.sharding.PartitionSpec('x', None)", "jax.P('x')", "P(('x',),)", "P((),)", "P(['x', 'y'])",
    "P(('x', 'y'))", "P(UNCONSTRAINED, 'x')", "P(P.UNCONSTRAINED,)", "P('x', unreduced={'y'})",
    "P(reduced={'y'})", "P('x', unreduced={'y'}, reduced={'z'})", "P('x', unreduced=frozenset({'y'}))",
    "  P('x' , None)  ",
]
#: Bare tuples (as tuple(spec) prints) and the plain form, each with the P(...) it means.
OTHER_FORMS = [
    ("('x', None)", "P('x', None)"), ("(('x', 'y'), None)", "P(('x', 'y'), None)"), ("(None,)", "P(None,)"),
    ("()", "P()"), ("x,y", "P('x', 'y')"), ("x", "P('x')"), ("x,", "P('x',)"), ("None", "P(None)"),
    ("x,None", "P('x', None)"), ("x,-", "P('x', None)"), ("x*y,-", "P(('x', 'y'), None)"),
    ("(x, y),None", "P(('x', 'y'), None)"), ("-, x", "P(None, 'x')"), ("(x,)", "P('x')"),
]


def _jax(text: str) -> PartitionSpec:
    return eval(text.strip(), {"P": PartitionSpec, "PartitionSpec": PartitionSpec, "jax": jax,
                               "UNCONSTRAINED": PartitionSpec.UNCONSTRAINED})


def _same_as_jax(text: str, spec: PartitionSpec) -> None:
    parsed = parse(text)
    ours = tuple(PartitionSpec.UNCONSTRAINED if e is UNCONSTRAINED else e for e in parsed.entries)
    assert ours == spec.partitions, text
    assert (parsed.unreduced, parsed.reduced) == (spec.unreduced, spec.reduced), text
    kind = getattr(spec, "unreduced_kind", None)  # jax 0.12+: how unreduced values combine, printed by repr
    assert parsed.unreduced_kind in (None, kind and kind.name), text
    assert PartitionSpec(*ours, unreduced=parsed.unreduced, reduced=parsed.reduced) == spec


@pytest.mark.parametrize("text", PYTHON_FORMS)
def test_python_forms_parse_to_jaxs_spec(text):
    _same_as_jax(text, _jax(text))


@pytest.mark.parametrize("spec", [PartitionSpec("x", None), PartitionSpec(("x", "y"),), PartitionSpec(None, "x"),
                                  PartitionSpec(), PartitionSpec("x"), PartitionSpec(None),
                                  PartitionSpec(("x", "y"), None, "z"), PartitionSpec("x", unreduced=frozenset({"y", "z"})),
                                  PartitionSpec(PartitionSpec.UNCONSTRAINED, "x")])
def test_jaxs_repr_and_str_parse_back(spec):
    for text in (repr(spec), str(spec), "jax.sharding.PartitionSpec" + repr(spec)[1:]):
        _same_as_jax(text, spec)


@pytest.mark.parametrize(("text", "python"), OTHER_FORMS)
def test_bare_tuples_and_plain_forms_parse_to_jaxs_spec(text, python):
    _same_as_jax(text, _jax(python))


@pytest.mark.parametrize(("text", "message"), [
    ("P(x)", "dimension 0's entry x is not None, a mesh axis name or a tuple of names (quote mesh axis names"),
    ("P(1, 4)", "piece counts such as P(1, 4) are sharded_jit's"),
    ("P(('x', None),)", "dimension 0's entry ('x', None) is not"),
    ("x,,y", "dimension 1's entry is empty"),
    (",", "dimension 0's entry is empty"),
    ("x y", "dimension 0's entry 'x y' is not"),
    ("P('x', foo=1)", "keyword 'foo=1' is not unreduced={...}, reduced={...} or unreduced_kind=..."),
    ("P('x', unreduced='y')", "unreduced= takes a set of mesh axis names"),
    ("P('x', unreduced={'x'})", "mesh axis 'x' shards a dimension and is unreduced too"),
    ("P(unreduced={'y'}, reduced={'y'})", "mesh axis 'y' is both unreduced and reduced"),
    ("", "not a PartitionSpec: ''; expected P('x', None)"),
    ("P('x'", "not a PartitionSpec: \"P('x'\"; expected P('x', None)"),
    ("f('x')", "not a PartitionSpec"),
])
def test_malformed_specs_say_which_entry_is_wrong(text, message):
    with pytest.raises(PartitionSpecSyntaxError, match="^not a PartitionSpec: ") as info:
        parse(text)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("text", ["P('x', unreduced={'x'})", "P(unreduced={'y'}, reduced={'y'})"])
def test_specs_refused_here_are_refused_by_jax_too(text):
    with pytest.raises(ValueError):
        _jax(text)


@pytest.mark.parametrize("text, kind", [("P('x', unreduced={'y'}, unreduced_kind=sum)", "sum"),
                                        ("P('x', unreduced={'y'}, unreduced_kind='max')", "max"),
                                        ("P(unreduced={'y'}, unreduced_kind=jax.sharding.UnreducedKind.min)", "min")])
def test_the_kind_of_unreduced_axes_is_read_as_jax_0_12_prints_it(text, kind):
    assert parse(text).unreduced_kind == kind


def test_an_unknown_unreduced_kind_is_refused():
    with pytest.raises(PartitionSpecSyntaxError, match="unreduced_kind= takes one of sum, max, min; got mean"):
        parse("P('x', unreduced={'y'}, unreduced_kind=mean)")
