"""pxla-mlir names the choice spelled most like a misspelled one, for every choice-valued flag of every
command (declared to argparse, --stage's open after:<pass> too), and for the same values in diff's emit specs."""

from __future__ import annotations

import argparse

import pytest
from conftest import REPO

from pxla_mlir.tools import cli

MAP = f"{REPO / 'examples' / 'nested_reduction.py'}:two_level_sum"


def _choice_flags() -> list[tuple[str, str, str]]:
    """(command, flag, choice) for every choice of every choice-valued flag of every command."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = []
    for name, command in sub.choices.items():
        for action in command._actions:
            if action.choices is not None and action.option_strings:
                found += [(name, action.option_strings[-1], c) for c in action.choices if "<" not in c]
    return found


CHOICE_FLAGS = _choice_flags()


def _error(capsys, *argv) -> str:
    assert cli.main(list(argv)) == 2
    captured = capsys.readouterr()
    assert not captured.out and captured.err.startswith("pxla-mlir: error: ") and captured.err.count("\n") == 1
    return captured.err.rstrip("\n")


def test_every_choice_valued_flag_is_found():
    flags = {(command, flag) for command, flag, _ in CHOICE_FLAGS}
    assert {("emit", "--stage"), ("emit", "--dialect"), ("emit", "--map"), ("emit", "--mode"), ("run", "--launcher"),
            ("diff", "--color"), ("show-sharding", "--color"), ("explore", "--pieces")} <= flags


@pytest.mark.parametrize(("command", "flag", "choice"), CHOICE_FLAGS)
def test_a_misspelled_choice_names_the_choice(capsys, command, flag, choice):
    wrong = choice + choice[-1]
    err = _error(capsys, command, flag, wrong)
    assert f"argument {flag}: invalid choice: '{wrong}' (choose from " in err
    assert err.endswith(f"(see pxla-mlir {command} --help); did you mean '{choice}'?")


def test_emit_stage_hbo_names_hlo(capsys):
    err = _error(capsys, "emit", MAP, "--stage", "hbo")
    assert err == ("pxla-mlir: error: argument --stage: invalid choice: 'hbo' (choose from 'pxla', 'mhlo', 'hlo', "
                   "'xla', 'after:<pass>') (see pxla-mlir emit --help); did you mean 'hlo'?")


def test_a_module_files_stage_is_checked_as_a_maps(capsys):
    err = _error(capsys, "emit", str(REPO / "examples" / "per_device_psum.mlir"), "--stage", "hbo")
    assert err.endswith("did you mean 'hlo'?")


def test_a_misspelled_pass_after_names_the_pipelines_pass(capsys):
    err = _error(capsys, "emit", MAP, "--stage", "after:pxla-expand-shrd")
    assert "unknown stage 'after:pxla-expand-shrd': the pipeline runs " in err
    assert err.endswith("; did you mean 'after:pxla-expand-shard'?")


@pytest.mark.parametrize(("query", "message"), [
    ("stage=hbo", "stage=hbo in '{map}': invalid choice: 'hbo' (choose from 'pxla', 'mhlo', 'hlo', 'xla', "
                  "'after:<pass>'); did you mean 'hlo'?"),
    ("pieces=onn", "pieces=onn in '{map}': invalid choice: 'onn' (choose from 'on', 'off'); did you mean 'on'?"),
    ("dialect=stablhlo", "dialect=stablhlo in '{map}': invalid choice: 'stablhlo' (choose from 'mhlo', "
                         "'stablehlo'); did you mean 'stablehlo'?"),
    ("map=pamp", "map=pamp in '{map}': invalid choice: 'pamp' (choose from 'pmap', 'xmap'); did you mean 'pmap'?"),
])
def test_diff_emit_specs_check_choices_as_emits_flags_do(capsys, query, message):
    err = _error(capsys, "diff", MAP, f"{MAP}?{query}")
    assert err == "pxla-mlir: error: " + message.format(map=MAP)


def test_a_misspelled_emit_spec_key_names_the_key(capsys):
    assert _error(capsys, "diff", MAP, f"{MAP}?stag=hlo").endswith("; did you mean 'stage'?")


def test_a_misspelled_backend_names_the_platform(capsys):
    err = _error(capsys, "--backend", "cpy", "passes")
    assert err == ("pxla-mlir: error: argument --backend: unknown platform 'cpy' (jax's: cpu, tpu, cuda, rocm, gpu) "
                   "(see pxla-mlir --help); did you mean 'cpu'?")


def test_a_misspelled_pass_name_names_the_pass(capsys):
    err = _error(capsys, "passes", "pxla-expand-shrd")
    assert err.endswith("(run 'pxla-mlir passes'); did you mean 'pxla-expand-shard'?")


@pytest.mark.parametrize(("spec", "message"), [
    ("?pieces=onn", "pieces=onn in --compare '?pieces=onn': invalid choice: 'onn' (choose from 'on', 'off'); did "
                    "you mean 'on'?"),
    ("?uhshard=all-gather", "unknown option 'uhshard' in --compare '?uhshard=all-gather'; known: "),
])
def test_explore_compare_specs_check_choices_and_keys_as_diffs_do(capsys, tmp_path, spec, message):
    err = _error(capsys, "explore", MAP, "--compare", spec, "-o", str(tmp_path / "page.html"))
    assert err.startswith("pxla-mlir: error: " + message)
    assert err.endswith(("did you mean 'on'?", "did you mean 'unshard'?"))
    assert not (tmp_path / "page.html").exists()
