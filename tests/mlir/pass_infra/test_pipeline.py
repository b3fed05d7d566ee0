"""The pipeline parser, one-PassManager execution and the library runner."""

import dataclasses
import subprocess
import sys
import warnings

import pytest
from conftest import REPO
from jaxlib.mlir import ir

from pxla_mlir.mlir.core.diagnostics import DiagnosticCollector, PxlaWarning
from pxla_mlir.mlir.pass_infra import (
    ModulePass,
    PassError,
    Pipeline,
    PipelineFailure,
    PipelineSyntaxError,
    run_pipeline,
)

PARTITION_MODE = (REPO / "test" / "lit" / "Inputs" / "partition_mode.mlir").read_text()
MIXED = "builtin.module(pxla-convert-to-replica-mode,canonicalize,func.func(cse),pxla-verify-handoff{num-replicas=4})"


@pytest.mark.parametrize("text", [
    "builtin.module()",
    MIXED,
    "builtin.module(pxla-handoff-pipeline{mode=partition},symbol-dce)",
    "builtin.module( cse , func.func( canonicalize{max-iterations=3} , cse ) )",
])
def test_canonical_text_round_trips(ctx, text):
    once = str(Pipeline.parse(text, ctx))
    assert str(Pipeline.parse(once, ctx)) == once


def test_named_pipeline_expands_in_place(ctx):
    p = Pipeline.parse("builtin.module(symbol-dce,pxla-handoff-pipeline,cse)", ctx)
    text = str(p)
    assert text.startswith("builtin.module(symbol-dce,func.func(chlo-legalize-to-hlo),stablehlo-legalize-to-hlo")
    assert "pxla-convert-to-replica-mode" in text
    assert text.endswith("pxla-verify-handoff{num-replicas=0 num-partitions=0 sharding-dialect=auto},cse)")


def test_pxla_and_jaxlib_passes_share_one_pass_manager(ctx, parse):
    p = Pipeline.parse(MIXED, ctx)
    # Consecutive jaxlib passes merge into one textual step between pxla passes.
    kinds = [type(s).__name__ if not isinstance(s, str) else "text" for s in p.steps]
    assert kinds == ["ConvertToReplicaModePass", "text", "VerifyHandoffPass"]
    m = parse(PARTITION_MODE)
    p.pass_manager(ctx).run(m.operation)
    out = str(m)
    assert "mhlo.num_replicas = 4" in out and "replica_id" in out
    assert out.count("mhlo.add %0, %0") == 1  # cse merged the duplicate adds


@pytest.mark.subprocess
def test_python_and_pxla_opt_give_identical_output(ctx, parse, tmp_path):
    src = tmp_path / "in.mlir"
    src.write_text(PARTITION_MODE)
    cli = subprocess.run([sys.executable, "-m", "pxla_mlir.mlir.cli.pxla_opt", str(src), f"--pass-pipeline={MIXED}"],
                         capture_output=True, text=True, check=True)
    m = parse(PARTITION_MODE)
    run_pipeline(m, MIXED)
    assert cli.stdout == str(m)


def test_syntax_errors_point_at_the_element(ctx):
    with pytest.raises(PipelineSyntaxError) as e:
        Pipeline.parse("builtin.module(cse,pxla-nope)", ctx)
    assert e.value.col == len("builtin.module(cse,")
    assert "unknown pass or pipeline 'pxla-nope'" in e.value.message


@pytest.mark.subprocess
def test_failure_carries_diagnostics_and_a_reproducer(parse, tmp_path):
    m = parse(PARTITION_MODE)
    with pytest.raises(PipelineFailure) as e:
        run_pipeline(m, "builtin.module(pxla-verify-handoff{num-replicas=2})")
    [diag] = e.value.diagnostics
    assert diag.severity == "error" and "'mhlo.num_replicas' is 1 but 2 was expected" in diag.message
    assert diag.loc.line == 1
    rerun = subprocess.run([sys.executable, "-m", "pxla_mlir.mlir.cli.pxla_opt", "--run-reproducer",
                            e.value.reproducer], capture_output=True, text=True)
    assert rerun.returncode == 1 and "is 1 but 2 was expected" in rerun.stderr


def test_reproducers_go_where_asked_and_the_cache_is_bounded(parse, tmp_path, monkeypatch):
    from pxla_mlir.mlir.pass_infra import reproducer

    def fail() -> PipelineFailure:
        with pytest.raises(PipelineFailure) as e:
            run_pipeline(parse(PARTITION_MODE), "builtin.module(pxla-verify-handoff{num-replicas=2})")
        return e.value

    monkeypatch.setenv("PXLA_REPRO_DIR", str(tmp_path / "asked"))
    failures = [fail() for _ in range(reproducer.KEEP + 3)]
    saved = sorted((tmp_path / "asked").iterdir())
    assert sorted(f.reproducer for f in failures) == [str(p) for p in saved]  # all kept where the user asked
    assert str(failures[-1]).endswith(f"\nreproduce with: pxla-opt --run-reproducer {failures[-1].reproducer}")

    monkeypatch.delenv("PXLA_REPRO_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    failures = [fail() for _ in range(reproducer.KEEP + 3)]
    cache = tmp_path / "cache" / "pxla_mlir" / "reproducers"
    kept = sorted(str(p) for p in cache.iterdir())
    assert len(kept) == reproducer.KEEP and failures[-1].reproducer in kept
    assert all(p.startswith(str(cache)) for p in kept)


@dataclasses.dataclass(frozen=True)
class Buggy(ModulePass):
    argument = "pxla-test-buggy"
    summary = "raises a Python error"

    def run(self, module):
        {}["missing"]


@dataclasses.dataclass(frozen=True)
class Picky(ModulePass):
    argument = "pxla-test-picky"
    summary = "reports every func, with a note, and warns"

    def run(self, module):
        for op in module.regions[0].blocks[0].operations:
            self.warn(op, "looked at this")
            self.error(op, "not allowed", notes=[(module, "module is here")])


@dataclasses.dataclass(frozen=True)
class Abort(ModulePass):
    argument = "pxla-test-abort"
    summary = "raises PassError"

    def run(self, module):
        raise PassError(None, "stopped")


def _run(ctx, m, *passes):
    pm = Pipeline(tuple(passes)).pass_manager(ctx)
    with DiagnosticCollector(ctx) as diags, pytest.raises(ir.MLIRError):
        pm.run(m.operation)
    return diags.diagnostics


def test_a_python_exception_inside_a_pass_becomes_a_located_error(ctx, parse):
    diags = _run(ctx, parse(PARTITION_MODE), Buggy())
    assert [d.severity for d in diags] == ["error"]
    assert diags[0].message.startswith("internal error in pxla-test-buggy: KeyError: 'missing'")


def test_errors_warnings_and_notes_in_order(ctx, parse):
    diags = _run(ctx, parse(PARTITION_MODE), Picky())
    assert [(d.severity, d.message) for d in diags] == [("warning", "looked at this"), ("error", "not allowed")]
    assert diags[1].loc.line == 2 and diags[1].notes[0].message == "module is here"


def test_pass_error_without_op_reports_at_the_module(ctx, parse):
    [d] = _run(ctx, parse(PARTITION_MODE), Abort())
    assert d.message == "stopped" and d.loc.line == 1


def test_warning_without_a_collector_is_a_python_warning(ctx, parse):
    m = parse(PARTITION_MODE)

    @dataclasses.dataclass(frozen=True)
    class Warns(ModulePass):
        argument = "pxla-test-warns"
        summary = "warns"

        def run(self, module):
            self.warn(module, "heads up")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Pipeline((Warns(),)).pass_manager(ctx).run(m.operation)
    assert any(issubclass(w.category, PxlaWarning) and "heads up" in str(w.message) for w in caught)


@dataclasses.dataclass(frozen=True)
class Breaks(ModulePass):
    argument = "pxla-test-breaks"
    summary = "leaves a module the verifier rejects"

    def run(self, module):
        main = module.regions[0].blocks[0].operations[0]
        main.attributes["sym_visibility"] = ir.StringAttr.get("bogus")


@dataclasses.dataclass(frozen=True)
class Seen(ModulePass):
    argument = "pxla-test-seen"
    summary = "records that it ran"
    checks_only = True
    ran = []

    def run(self, module):
        self.ran.append(str(module).count("bogus"))


def test_a_pass_that_leaves_invalid_ir_fails_before_the_next_pass_runs(ctx, parse):
    """pxla-opt's default verifies after pxla passes that change the module only: the
    verifier's error is the pass's failure, and no later pass (C++ or Python) sees the IR."""
    Seen.ran.clear()
    pm = Pipeline((Breaks(), "canonicalize", Seen())).pass_manager(ctx, "pxla-changes")
    with DiagnosticCollector(ctx) as diags, pytest.raises(ir.MLIRError):
        pm.run(parse(PARTITION_MODE).operation)
    # the verifier's error, then the pass that left the module so
    assert [d.severity for d in diags.diagnostics] == ["error", "error"]
    assert "visibility expected to be one of" in diags.diagnostics[0].message
    assert f"{Breaks.argument} left invalid IR" in diags.diagnostics[1].message
    assert Seen.ran == []


def test_a_checks_only_pass_is_not_followed_by_the_verifier(ctx, parse):
    Seen.ran.clear()
    m = parse(PARTITION_MODE)
    Pipeline((Breaks(),)).pass_manager(ctx, "none").run(m.operation)  # invalid now, unverified
    Pipeline((Seen(), Seen())).pass_manager(ctx, "pxla-changes").run(m.operation)
    assert Seen.ran == [1, 1]
    with pytest.raises(ir.MLIRError, match="visibility expected"):
        Pipeline((Seen(),)).pass_manager(ctx, "every-pass").run(m.operation)


def test_the_pxla_changes_policy_knows_when_the_module_is_left_verified(ctx):
    def verified(*steps):
        return Pipeline(tuple(steps)).verified_at_end("pxla-changes")

    assert verified() and verified(Breaks()) and verified(Breaks(), Seen())
    assert not verified("canonicalize") and not verified(Breaks(), "cse", Seen())
    assert verified("cse", Breaks(), Seen())
    assert Pipeline(("cse",)).verified_at_end("every-pass") and not Pipeline((Breaks(),)).verified_at_end("none")
