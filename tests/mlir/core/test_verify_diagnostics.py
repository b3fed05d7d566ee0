"""The expected-* verifier as a unit: designators, -re, mismatches."""

from pxla_mlir.mlir.core.diagnostics import Diagnostic, SourceLoc
from pxla_mlir.mlir.core.verify_diagnostics import parse_expectations, verify

TEXT = """\
op0
// expected-error @+1 {{first}}
op2
// expected-warning@below {{second}}
// expected-note @below {{third}}
op5
op6
// expected-remark @above {{fourth}}
// expected-error @-3 {{fifth}}
// expected-error @unknown {{nowhere}}
op10 // expected-error {{same line}}
// expected-error-re @-1 {{value {{[0-9]+}} is bad}}
"""


def diag(sev, line, msg):
    return Diagnostic(sev, msg, SourceLoc("-", line, 1) if line else None)


def test_designators_resolve_to_lines():
    exps, errors = parse_expectations(TEXT)
    assert not errors
    assert [(e.kind, e.line) for e in exps] == [
        ("error", 3), ("warning", 6), ("note", 6), ("remark", 7), ("error", 6), ("error", None),
        ("error", 11), ("error", 11)]


def test_lines_are_counted_as_mlir_counts_them():
    # A form feed, U+2028 or a lone '\r' in a comment ends no line for MLIR's locations.
    exps, errors = parse_expectations("// a\x0cb\u2028c\rd\r\n// expected-error @+1 {{here}}\r\nop2\n")
    assert not errors and [(e.kind, e.line) for e in exps] == [("error", 3)]


def test_all_met():
    exps, _ = parse_expectations(TEXT)
    diags = [diag("error", 3, "the first one"), diag("warning", 6, "second"), diag("note", 6, "third!"),
             diag("remark", 7, "fourth"), diag("error", 6, "fifth"), diag("error", None, "nowhere"),
             diag("error", 11, "same line"), diag("error", 11, "value 42 is bad")]
    assert verify(exps, diags) == []


def test_missing_and_unexpected():
    exps, _ = parse_expectations(TEXT)
    problems = verify(exps, [diag("error", 3, "first"), diag("error", 4, "surprise"), diag("error", 11, "value x is bad")])
    messages = [p.message for p in problems]
    assert "unexpected error: surprise (at line 4)" in messages
    assert "unexpected error: value x is bad (at line 11)" in messages
    assert 'expected warning "second" on line 6 was not produced' in messages
    assert 'expected error "nowhere" on an unknown location was not produced' in messages
    assert len([m for m in messages if m.startswith("expected")]) == 7


def test_wrong_severity_does_not_match():
    exps, _ = parse_expectations("x // expected-warning {{w}}\n")
    assert [p.message for p in verify(exps, [diag("error", 1, "w")])] == [
        "unexpected error: w (at line 1)", 'expected warning "w" on line 1 was not produced']


def test_malformed_expectation_is_reported():
    _, errors = parse_expectations("// expected-error @+1 missing braces\n")
    assert errors and "malformed expectation" in errors[0]


def test_current_operation_notes_are_ignored():
    note = Diagnostic("note", "see current operation: %0 = ...", SourceLoc("-", 1, 1))
    err = Diagnostic("error", "bad", SourceLoc("-", 1, 1), (note,))
    exps, _ = parse_expectations("x // expected-error {{bad}}\n")
    assert verify(exps, [err]) == []
