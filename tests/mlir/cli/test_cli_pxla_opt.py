"""pxla-opt's mlir-opt conventions: ``-p``, a flag per pass (in the order
given, with options), "did you mean" for misspelled passes and flags, and
``--run-reproducer`` replaying what a failing pipeline saved."""

from __future__ import annotations

import os
import pathlib
import shlex

import pytest
from conftest import REPO

from pxla_mlir.mlir.cli import pxla_opt
from pxla_mlir.mlir.pass_infra import PipelineFailure, jaxlib_passes, reproducer, run_pipeline

PARTITION_MODE = REPO / "test" / "lit" / "Inputs" / "partition_mode.mlir"
FAILING = "builtin.module(pxla-verify-handoff{num-replicas=2})"


def _opt(capsys, *argv) -> tuple[int, str, str]:
    rc = pxla_opt.main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def _pipeline_of(capsys, *argv) -> str:
    rc, _, err = _opt(capsys, PARTITION_MODE, "--dump-pass-pipeline", "-o", "/dev/null", *argv)
    assert rc == 0, err
    (line,) = [l for l in err.splitlines() if l.startswith("Pass pipeline: ")]
    return line.removeprefix("Pass pipeline: ")


def test_p_is_pass_pipeline(capsys):
    pipeline = "builtin.module(pxla-convert-to-replica-mode,canonicalize)"
    short = _opt(capsys, PARTITION_MODE, "-p", pipeline)
    joined = _opt(capsys, PARTITION_MODE, f"-p{pipeline}")
    long = _opt(capsys, PARTITION_MODE, f"--pass-pipeline={pipeline}")
    assert short == joined == long and short[0] == 0 and "mhlo.num_replicas = 4" in short[1]


def test_each_pass_is_a_flag_run_in_the_order_given(capsys):
    as_flags = _pipeline_of(capsys, "-pxla-convert-to-replica-mode", "--canonicalize=max-iterations=3",
                            "-pxla-verify-handoff=num-replicas=4 sharding-dialect=gspmd")
    as_pipeline = _pipeline_of(capsys, "-p", "builtin.module(pxla-convert-to-replica-mode,canonicalize{max-iterations=3},"
                                             "pxla-verify-handoff{num-replicas=4 sharding-dialect=gspmd})")
    assert as_flags == as_pipeline
    assert as_flags.index("pxla-convert-to-replica-mode") < as_flags.index("canonicalize") < as_flags.index(
        "pxla-verify-handoff")
    reordered = _pipeline_of(capsys, "-canonicalize", "-pxla-convert-to-replica-mode")
    assert reordered.index("canonicalize") < reordered.index("pxla-convert-to-replica-mode")


def test_a_pass_on_func_nests_and_flag_values_are_not_passes(capsys, tmp_path, monkeypatch):
    func_pass = jaxlib_passes.FUNC_PASSES[0]
    assert f"func.func({func_pass}" in _pipeline_of(capsys, f"-{func_pass}")
    # -o's value is a file name, even one spelled like a pass.
    rc, _, err = _opt(capsys, PARTITION_MODE, "-o", tmp_path / "-cse", "-canonicalize")
    assert rc == 0, err
    assert (tmp_path / "-cse").read_text().startswith("module")
    # ... and so is one joined on, as is -p's pipeline.
    monkeypatch.chdir(tmp_path)
    rc, _, err = _opt(capsys, PARTITION_MODE, "-ojoined.mlir", "-pbuiltin.module(canonicalize)")
    assert rc == 0, err
    assert (tmp_path / "joined.mlir").read_text().startswith("module")


def test_pass_flags_and_a_pipeline_do_not_mix(capsys):
    rc, _, err = _opt(capsys, PARTITION_MODE, "-canonicalize", "-p", "builtin.module(cse)")
    assert rc == 2 and err == "pxla-opt: error: give the passes either as flags (-canonicalize ...) or as " \
                              "-p/--pass-pipeline, not both\n"
    rc, _, err = _opt(capsys, PARTITION_MODE, "-canonicalize=")
    assert rc == 2 and "-canonicalize=: give the pass options after '='" in err


@pytest.mark.parametrize(("argv", "wrong", "meant"), [
    (["-p", "builtin.module(expand-shard)"], "unknown pass or pipeline 'expand-shard'", "'pxla-expand-shard'"),
    (["-p", "builtin.module(canonicalise)"], "unknown pass or pipeline 'canonicalise'", "'canonicalize'"),
    (["-canonicalise"], "unrecognized arguments: -canonicalise (see pxla-opt --help)", "'-canonicalize'"),
    (["-pxla-expand-shards"], "unrecognized arguments: -pxla-expand-shards", "'-pxla-expand-shard'"),
    (["--verify-diag"], "unrecognized arguments: --verify-diag (see pxla-opt --help)", "'--verify-diagnostics'"),
    (["--split-input"], "unrecognized arguments: --split-input", "'--split-input-file'"),
    (["-pxla_expand_shard"], "unrecognized arguments: -pxla_expand_shard", "'-pxla-expand-shard'"),  # not -p
    (["--verify_each"], "unrecognized arguments: --verify_each", "'--verify-each'"),
])
def test_misspelled_passes_and_flags_get_a_suggestion(capsys, argv, wrong, meant):
    rc, out, err = _opt(capsys, PARTITION_MODE, *argv)
    assert rc == 2 and not out
    assert wrong in err and f"did you mean {meant}?" in err
    assert "Traceback" not in err


def test_nothing_close_gets_no_suggestion(capsys):
    rc, _, err = _opt(capsys, PARTITION_MODE, "--no-such-flag-at-all-zzz")
    assert rc == 2 and err == "pxla-opt: error: unrecognized arguments: --no-such-flag-at-all-zzz (see pxla-opt " \
                              "--help)\n"


def test_help_ends_its_options_with_examples():
    text = pxla_opt.build_arg_parser().format_help()
    assert "\nexamples:\n" + "\n".join(f"  {line}" for line in pxla_opt.EXAMPLES) + "\n" in text
    assert "-p PIPELINE, -pass-pipeline PIPELINE, --pass-pipeline PIPELINE" in text


@pytest.mark.parametrize("line", [line for line in pxla_opt.EXAMPLES
                                  if line.startswith("pxla-opt ") and "--run-reproducer" not in line])
def test_the_help_examples_passes_and_options_exist(capsys, line):
    """Each example's pipeline parses, its passes and options spelled right (on another input here;
    tests/tools/test_help_examples.py runs the examples as written)."""
    words = shlex.split(line, comments=True)[1:]
    words[next(i for i, w in enumerate(words) if w.endswith(".mlir"))] = str(PARTITION_MODE)
    if "-o" in words:  # -o may be given once: the example's goes nowhere here
        words[words.index("-o") + 1] = os.devnull
    else:
        words += ["-o", os.devnull]
    rc, _, err = _opt(capsys, *words, "--dump-pass-pipeline")
    assert rc != 2 and "Pass pipeline: builtin.module(" in err, err


@pytest.fixture
def saved_reproducer(parse, tmp_path, monkeypatch) -> PipelineFailure:
    monkeypatch.setenv("PXLA_REPRO_DIR", str(tmp_path / "repro"))
    with pytest.raises(PipelineFailure) as e:
        run_pipeline(parse(PARTITION_MODE.read_text()), FAILING)
    return e.value


def test_a_reproducer_records_its_pipeline_as_mlir_does(saved_reproducer):
    text = pathlib.Path(saved_reproducer.reproducer).read_text(encoding="utf-8")
    assert text.rstrip().endswith("#-}") and "  external_resources: {\n    mlir_reproducer: {\n" in text
    module, recorded = reproducer.split(text.encode())
    assert recorded == reproducer.Recorded(str(saved_reproducer.pipeline), verify_each=True)
    assert b"{-#" not in module and b"\nmodule @spmd " in module


def test_run_reproducer_replays_to_the_same_error(saved_reproducer, capsys):
    [diag] = saved_reproducer.diagnostics
    rc, out, err = _opt(capsys, "--run-reproducer", saved_reproducer.reproducer)
    assert rc == 1 and not out
    first = err.splitlines()[0]
    assert first == f"{saved_reproducer.reproducer}:{diag.loc.line}:{diag.loc.col}: error: {diag.message}"
    # The command the failure message gives runs the same, and neither warns about the trailer.
    assert _opt(capsys, saved_reproducer.reproducer, f"--pass-pipeline={saved_reproducer.pipeline}") == (rc, out, err)
    assert "external resources" not in err


def test_run_reproducer_mistakes(saved_reproducer, capsys):
    rc, _, err = _opt(capsys, "--run-reproducer", saved_reproducer.reproducer, "-p", "builtin.module(cse)")
    assert rc == 2 and "--run-reproducer runs the pipeline the reproducer records; drop -p" in err
    rc, _, err = _opt(capsys, "--run-reproducer", PARTITION_MODE)
    assert rc == 2 and f"pxla-opt: error: {PARTITION_MODE} records no pipeline: a reproducer ends with {{-# " in err
    assert "give the pipeline with -p PIPELINE instead" in err


def test_trailer_round_trips_quotes_and_backslashes():
    recorded = reproducer.Recorded('builtin.module(p{s="a\\\\b" t={x}})', verify_each=False, disable_threading=True)
    module, found = reproducer.split(b"module {}\n\n" + reproducer.trailer(recorded).encode())
    assert (module, found) == (b"module {}\n\n", recorded)
    assert reproducer.split(b"module {}\n{-# dialect_resources: {} #-}\n") == (
        b"module {}\n{-# dialect_resources: {} #-}\n", None)


@pytest.mark.parametrize("options", ["max-iterations=3},cse,canonicalize{", "max-iterations=3}", "max-iterations={3"])
def test_a_pass_flags_options_are_a_value_and_never_add_passes(capsys, options):
    rc, out, err = _opt(capsys, PARTITION_MODE, f"--canonicalize={options}", "--dump-pass-pipeline")
    assert rc == 2 and not out and "Pass pipeline:" not in err
    assert err.startswith(f"pxla-opt: error: --canonicalize={options}: ") and "give each pass its own flag" in err


def test_braces_that_balance_stay_in_the_options(capsys):
    pipeline = _pipeline_of(capsys, "-inline=default-pipeline={canonicalize{max-iterations=3},cse}")
    assert pipeline.startswith("builtin.module(inline{default-pipeline=canonicalize{max-iterations=3},cse ")
    assert pipeline.count("inline{") == 1 and ",cse," not in pipeline and not pipeline.endswith(",cse)")


def test_double_dash_ends_the_flags(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-cse").write_text("func.func @named_like_a_flag() {\n  return\n}\n")
    rc, out, err = _opt(capsys, "--", "-cse")
    assert rc == 0 and "@named_like_a_flag" in out, err
    rc, out, err = _opt(capsys, "-canonicalize", "--dump-pass-pipeline", "--", "-cse")
    assert rc == 0 and "@named_like_a_flag" in out and "Pass pipeline: builtin.module(canonicalize{" in err
    assert ",cse" not in err


NESTED_UNKNOWN = [("-inline=default-pipeline=nosuchpass",),
                  ("-p", "builtin.module(func.func(cse),inline{default-pipeline=canonicalize,nosuchpass})"),
                  ("-p", "builtin.module(inline{op-pipelines=func.func(nosuchpass)})")]


@pytest.mark.parametrize("argv", NESTED_UNKNOWN)
def test_a_nested_pipeline_naming_an_unknown_pass_is_a_usage_error(capfd, argv):
    rc, out, err = _opt(capfd, PARTITION_MODE, *argv)  # capfd: jaxlib writes to descriptor 2 itself
    assert rc == 2 and not out
    assert "inline: " in err and "unknown pass or pipeline 'nosuchpass'" in err
    assert "MLIR Textual PassPipeline Parser" not in err  # jaxlib's own message, printed while the pass ran


def test_a_replayed_nested_pipeline_naming_an_unknown_pass_is_a_usage_error(capsys, tmp_path):
    saved = tmp_path / "repro.mlir"
    recorded = reproducer.Recorded("builtin.module(inline{default-pipeline=nosuchpass})")
    saved.write_text(reproducer.with_trailer(PARTITION_MODE.read_text(), recorded))
    rc, out, err = _opt(capsys, "--run-reproducer", saved)
    assert rc == 2 and not out
    assert "inline: option 'default-pipeline': unknown pass or pipeline 'nosuchpass'" in err


@pytest.mark.parametrize("bytecode", [False, True])
def test_the_crash_reproducer_flag_writes_what_run_reproducer_replays(capsys, tmp_path, bytecode):
    source = PARTITION_MODE
    if bytecode:
        source = tmp_path / "in.mlirbc"
        assert _opt(capsys, PARTITION_MODE, "--emit-bytecode", "-o", source)[0] == 0
    crash = tmp_path / "crash.mlir"
    rc, out, err = _opt(capsys, source, "-p", FAILING, f"--mlir-pass-pipeline-crash-reproducer={crash}")
    assert rc == 1 and not out
    assert err.endswith(f"pxla-opt: wrote a reproducer to {crash}; replay it with: pxla-opt --run-reproducer {crash}\n")
    _, recorded = reproducer.split(crash.read_bytes())
    assert recorded is not None and recorded.pipeline.startswith("builtin.module(pxla-verify-handoff{num-replicas=2 ")
    replay_rc, _, replayed = _opt(capsys, "--run-reproducer", crash)
    errors = [line.split(" error: ", 1)[1] for line in err.splitlines() if " error: " in line]
    assert replay_rc == 1 and errors == [line.split(" error: ", 1)[1] for line in replayed.splitlines()
                                         if " error: " in line]
    if not bytecode:  # the module as written: the errors keep their lines
        assert replayed == err.split("pxla-opt: wrote")[0].replace(str(PARTITION_MODE), str(crash))


def test_no_crash_reproducer_when_the_pipeline_runs(capsys, tmp_path):
    crash = tmp_path / "crash.mlir"
    rc, _, err = _opt(capsys, PARTITION_MODE, "-canonicalize", f"--mlir-pass-pipeline-crash-reproducer={crash}")
    assert rc == 0 and not crash.exists() and "reproducer" not in err
