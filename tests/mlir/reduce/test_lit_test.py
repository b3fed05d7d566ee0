"""The pipeline check's report and the lit tests made from a reduced module:
pxla-opt --verify-diagnostics (run in-process here) accepts each expected-*
line where it is put; the RUN lines say what the test ran."""

import contextlib
import io

from pxla_mlir.mlir.cli import pxla_opt
from pxla_mlir.mlir.core.diagnostics import Diagnostic, SourceLoc
from pxla_mlir.mlir.reduce import lit_test
from pxla_mlir.mlir.reduce.pipeline_check import PipelineCheck, diagnostic_from_dict

REDUCED = """module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = chlo.erf %arg0 : tensor<3xf32> -> tensor<3xf32>
    %1 = stablehlo.partition_id : tensor<ui32>
    return %0 : tensor<3xf32>
  }
}
"""
HANDOFF = "builtin.module(pxla-verify-handoff)"


def test_the_pipeline_check_reports_every_error_where_it_is():
    report = PipelineCheck(HANDOFF).report(REDUCED)
    assert report["failures"] == ["'chlo.erf' is not builtin/func/mhlo; legalize it with func.func(chlo-legalize-to-hlo)",
                                  "'stablehlo.partition_id' is not builtin/func/mhlo; legalize it with "
                                  "stablehlo-legalize-to-hlo"]
    lines = [diagnostic_from_dict(d).loc.line for d in report["diagnostics"]]
    assert [REDUCED.split("\n")[n - 1].split("=")[1].split()[0] for n in lines] == ["chlo.erf",
                                                                                     "stablehlo.partition_id"]
    assert PipelineCheck("builtin.module(canonicalize)").report(REDUCED) == {
        "failures": [], "note": "the pipeline succeeds", "diagnostics": []}


def _verify_diagnostics(path, test: str) -> tuple[int, str]:
    """pxla-opt on a lit test's module with its RUN line's flags (after 'pxla-opt %s')."""
    path.write_text(test)
    run = test.split("\n", 1)[0]
    assert run.startswith("// RUN: pxla-opt %s ")
    import shlex

    flags = shlex.split(run[len("// RUN: pxla-opt %s "):])
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = pxla_opt.main([str(path), *flags])
    return status, err.getvalue()


def test_a_pipeline_test_expects_each_diagnostic_on_its_line(tmp_path):
    report = PipelineCheck(HANDOFF).report(REDUCED)
    diagnostics = [diagnostic_from_dict(d) for d in report["diagnostics"]]
    test = lit_test.pipeline_test(REDUCED, HANDOFF, diagnostics, verify_each=True, note="Reduced from x.mlir.")
    assert test.count("expected-error @below {{") == 2 and "// Reduced from x.mlir." in test
    assert "--verify-each --verify-diagnostics" in test.split("\n", 1)[0]
    status, err = _verify_diagnostics(tmp_path / "t.mlir", test)
    assert status == 0, err
    broken = test.replace("@below {{'chlo.erf'", "@below {{'chlo.erfc'")
    status, err = _verify_diagnostics(tmp_path / "t.mlir", broken)  # the check can fail
    assert status == 1 and "was not produced" in err


def test_diagnostics_without_a_place_and_notes_get_theirs():
    where = SourceLoc("-", 3, 5)
    diagnostics = [Diagnostic("error", "no place", None),
                   Diagnostic("warning", "w {{x}} and }} cut", where, (Diagnostic("note", "see current operation: x",
                                                                                  where),
                                                                       Diagnostic("note", "a note", where)))]
    test = lit_test.pipeline_test(REDUCED, HANDOFF, diagnostics)
    assert "// expected-error @unknown {{no place}}" in test
    assert "    // expected-warning @below {{w {{x}}\n" in test  # cut before '}}'
    assert "    // expected-note @below {{a note}}" in test and "see current operation" not in test
    lines = test.split("\n")
    assert lines[lines.index("    // expected-note @below {{a note}}") + 1].lstrip().startswith("%0 = chlo.erf")


def test_diagnostics_in_another_file_are_checked_with_filecheck():
    elsewhere = [Diagnostic("error", "bad [[op]]", SourceLoc("model.py", 12, 3))]
    test = lit_test.pipeline_test(REDUCED, HANDOFF, elsewhere, plugins=["/abs/my passes.py"])
    run = test.split("\n", 1)[0]
    assert run == ("// RUN: not pxla-opt %s --load-pass-plugin='/abs/my passes.py' "
                   "--pass-pipeline='builtin.module(pxla-verify-handoff)' 2>&1 | filecheck %s")
    assert "// CHECK: error: bad\n" in test


def test_a_command_becomes_the_run_line():
    test = lit_test.command_test(REDUCED, "pxla-opt {} -p 'x' 2>&1 | grep -q '%d'")
    # by bash, as the reducer ran it: lit's shell would fail the pipeline where pxla-opt fails
    assert test.startswith("""// RUN: bash -c 'pxla-opt %s -p '"'"'x'"'"' 2>&1 | grep -q '"'"'%%d'"'"''\n""")
    assert lit_test.command_test(REDUCED, "./check.sh -v").startswith("// RUN: ./check.sh -v %s\n")
