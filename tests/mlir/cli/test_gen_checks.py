"""pxla-mlir gen-checks: the lines check the text they came from under both FileChecks, and fail
on a semantic change; the pxla_golden fixture's FileCheck goldens."""

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

from pxla_mlir.mlir.cli.gen_checks import check_lines, lines_of, split_chunks
from pxla_mlir.pytest_plugin import Golden

PYPI_FILECHECK = os.path.join(os.path.dirname(sys.executable), "filecheck")
LLVM_FILECHECK = shutil.which("FileCheck", path="/usr/lib/llvm-19/bin")
CHECKERS = [pytest.param(PYPI_FILECHECK, id="pypi"),
            pytest.param(LLVM_FILECHECK, id="llvm",
                         marks=pytest.mark.skipif(not LLVM_FILECHECK, reason="LLVM 19's FileCheck absent"))]
PMAP_INPUT = (REPO / "test" / "lit" / "pipelines" / "pmap_pipeline.mlir").read_text()


@pytest.fixture(scope="module")
def forms():
    """The pmap pipeline's output for the nested pmap of the lit test, in replica and partition mode."""
    from jaxlib.mlir import ir

    from pxla_mlir.mlir.core.context import make_context
    from pxla_mlir.mlir.pass_infra import run_pipeline

    out = {}
    for mode in ("replica", "partition"):
        ctx = make_context()
        with ctx:
            module = ir.Module.parse(PMAP_INPUT)
        run_pipeline(module, f"builtin.module(pxla-pmap-pipeline{{mode={mode}}})")
        out[mode] = str(module)
    return out


def filecheck(checker, checks, text, tmp_path, prefix="CHECK"):
    path = tmp_path / "checks.mlir"
    path.write_text("\n".join(checks) + "\n")
    return subprocess.run([checker, str(path), f"--check-prefix={prefix}"], input=text, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.parametrize("mode", ["replica", "partition"])
@pytest.mark.subprocess
def test_the_lines_check_the_text_they_came_from(checker, mode, forms, tmp_path):
    done = filecheck(checker, check_lines(forms[mode], "GEN"), forms[mode], tmp_path, "GEN")
    assert done.returncode == 0, done.stderr


MUTATIONS = {  # name: (mode, old, new)
    "replica_group": ("replica", "[[0, 1, 2, 3], [4, 5, 6, 7]]", "[[0, 2, 4, 6], [1, 3, 5, 7]]"),
    "mode": ("partition", "mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32",
             "mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32"),
    "dtype": ("replica", "(tensor<3x1xf32>) -> tensor<3x4xf32>", "(tensor<3x1xf32>) -> tensor<3x4xbf16>"),
    "global_device_ids": ("partition", "tensor<2x4xi64>, use_global_device_ids}> ({", "tensor<2x4xi64>}> ({"),
    "sdy_mesh": ("partition", '<["i"=2, "_pxla_rep"=4]>', '<["i"=4, "_pxla_rep"=2]>'),
    "pxla_mesh": ("replica", 'pxla.mesh = "i=2,_pxla_rep=4"', 'pxla.mesh = "i=4,_pxla_rep=2"'),
    "argument_attr": ("partition", '{sdy.sharding = #sdy.sharding<@mesh, [{"i"}, {}, {}]>}) ->',
                      '{sdy.sharding = #sdy.sharding<@mesh, [{}, {"i"}, {}]>}) ->'),
}


def _mutate(text, old, new):
    assert text.count(old) >= 1, f"{old!r} is not in the text: the mutation would test nothing"
    return text.replace(old, new, 1)


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.parametrize("name", sorted(MUTATIONS) + ["operand", "extra_op", "missing_op"])
@pytest.mark.subprocess
def test_a_semantic_change_fails_the_lines(checker, name, forms, tmp_path):
    text = forms["replica"]
    if name in MUTATIONS:
        mode, old, new = MUTATIONS[name]
        text = forms[mode]
        mutated = _mutate(text, old, new)
    else:  # dataflow and op-count changes keep every op's own text valid
        add = re.search(r"^( *)(%\d+) = mhlo\.add (%\d+), (%\d+) : tensor<3xf32>$", text, re.M)
        assert add, "no two-operand add to rewire"
        indent, result, lhs, _ = add.groups()
        if name == "operand":
            mutated = text.replace(add.group(0), f"{indent}{result} = mhlo.add {lhs}, {lhs} : tensor<3xf32>")
        elif name == "extra_op":
            mutated = text.replace(add.group(0), f"{add.group(0)}\n{indent}%junk = mhlo.negate {lhs} : tensor<3xf32>")
        else:
            line = next(l for l in text.splitlines() if "mhlo.replica_id" in l)
            mutated = text.replace(line + "\n", "", 1)
    assert mutated != text
    done = filecheck(checker, check_lines(text), mutated, tmp_path)
    assert done.returncode == 1, f"the checks passed on the mutated text:\n{mutated}"


def test_labels_names_and_module_attributes(forms):
    lines = check_lines(forms["partition"])
    labels = [l for l in lines if "-LABEL:" in l]
    assert labels == ["// CHECK-LABEL: module @pmap_outer attributes {",
                      "// CHECK-LABEL: func.func public @main(",
                      "// CHECK-LABEL: func.func private @main_per_device("]
    text = "\n".join(lines)
    for expected in ("// CHECK-SAME:    mhlo.num_partitions = 8 : i32,", "// CHECK-SAME:    mhlo.num_replicas = 1 : i32,",
                     '// CHECK-SAME:    pxla.mesh = "i=2,_pxla_rep=4"} {',
                     '// CHECK-NEXT:    sdy.mesh @mesh = <["i"=2, "_pxla_rep"=4]>'):
        assert expected in lines, f"missing {expected!r}"
    assert "%[[ALL_REDUCE:" in text and "%[[ARG0:" in text and "%[[MANUAL_COMPUTATION:" in text
    # Each function re-captures its own values: %arg0 of @main_per_device is ARG0 again, not a use.
    assert text.count("%[[ARG0:") == 2
    # Nothing the PyPI clone lacks.
    assert not any(re.search(r"\[\[#|@LINE|-DAG:|-EMPTY:", l) for l in lines)
    assert not any(re.fullmatch(r"// CHECK-(NEXT|SAME):\s*", l) for l in lines)


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.subprocess
def test_large_constants_are_elided_small_ones_kept(checker, tmp_path):
    values = ", ".join(f"{v}.000000e+00" for v in range(40))
    text = ("module {\n  func.func @f() -> (tensor<40xf32>, tensor<i32>) {\n"
            f"    %cst = mhlo.constant dense<[{values}]> : tensor<40xf32>\n"
            "    %0 = mhlo.constant dense<7> : tensor<i32>\n    return %cst, %0 : tensor<40xf32>, tensor<i32>\n  }\n}\n")
    lines = check_lines(text)
    assert any("%[[CST:" in l and "mhlo.constant dense<{{.*}}> : tensor<40xf32>" in l for l in lines)
    assert any("mhlo.constant dense<7> : tensor<i32>" in l for l in lines)
    assert filecheck(checker, lines, text, tmp_path).returncode == 0
    # The elided values may change; the type may not.
    assert filecheck(checker, lines, text.replace("1.000000e+00", "9.000000e+00"), tmp_path).returncode == 0
    assert filecheck(checker, lines, text.replace("tensor<40xf32>", "tensor<40xf16>"), tmp_path).returncode == 1


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.subprocess
def test_filecheck_syntax_in_the_text_is_checked_literally(checker, tmp_path):
    text = ('module {\n  func.func @f(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n'
            '    %0 = mhlo.custom_call @g(%arg0) {backend_config = "{{a}} [[b]] {[[c [[[d {{{e"} : '
            '(tensor<2xf32>) -> tensor<2xf32>\n    return %0 : tensor<2xf32>\n  }\n}\n')
    lines = check_lines(text)
    assert filecheck(checker, lines, text, tmp_path).returncode == 0, "\n".join(lines)
    for old, new in (("[[b]]", "[b]]"), ("{[[c", "{[c"), ("{{{e", "{{e"), ("{{a}}", "{a}}")):
        assert filecheck(checker, lines, text.replace(old, new), tmp_path).returncode == 1, old


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.subprocess
def test_lines_break_at_newlines_only(checker, tmp_path):
    # str.splitlines would also break at a form feed, U+2028 and others: not FileCheck, not MLIR.
    text = ('module {\r\n  func.func @f() attributes {s = "a\x0cb\x1cc\u2028d"} {\r\n    return\r\n  }\r\n}\r\n'
            '// -----\r\nmodule {\n}\n')
    assert lines_of(text)[1] == '  func.func @f() attributes {s = "a\x0cb\x1cc\u2028d"} {\r'
    first, second = split_chunks(text)
    lines = check_lines(first)
    assert len(lines) == 6 and lines[2].endswith('attributes {s = "a\x0cb\x1cc\u2028d"} {'), lines
    assert filecheck(checker, lines, first, tmp_path).returncode == 0, "\n".join(lines)
    assert second == "module {\n}"


@pytest.mark.subprocess
def test_cli_reads_a_file_or_stdin_and_names_an_empty_input(tmp_path, forms):
    module = tmp_path / "out.mlir"
    module.write_text(forms["replica"])
    run = subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", "gen-checks", str(module),
                          "--check-prefix", "GEN"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.splitlines() == check_lines(forms["replica"], "GEN"), run.stderr
    empty = subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", "gen-checks", "-"], input="\n",
                           capture_output=True, text=True, timeout=120)
    assert empty.returncode == 2 and empty.stderr == "pxla-mlir: error: stdin is empty: no checks to generate\n"


@pytest.mark.subprocess
def test_generator_and_update_checks_do_not_import_jax():
    code = ("import sys; import pxla_mlir.tools.cmd_checks, pxla_mlir.mlir.cli.gen_checks, pxla_mlir.tools.update_checks, "
            "pxla_mlir.tools.lit_runs; from pxla_mlir.tools import cmd_checks; "
            "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith(('jax.', 'jaxlib'))))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stdout + run.stderr


# -- pxla_golden.filecheck ----------------------------------------------------------------------------

@pytest.mark.subprocess
def test_filecheck_golden_is_written_kept_and_checked(tmp_path, forms):
    text = forms["replica"]
    Golden(tmp_path, update=True).filecheck("pmap.checks.mlir", text)
    path = tmp_path / "pmap.checks.mlir"
    assert "// CHECK-GEN-BEGIN" in path.read_text()
    Golden(tmp_path, update=False).filecheck("pmap.checks.mlir", text)
    with pytest.raises(pytest.fail.Exception, match="(?s)does not pass the FileCheck golden.*pytest --pxla-update-goldens"):
        Golden(tmp_path, update=False).filecheck("pmap.checks.mlir", _mutate(text, *MUTATIONS["replica_group"][1:]))
    # A hand-written line outside the block survives an update; the new block replaces the old.
    path.write_text("// A note kept by hand.\n// HAND: mhlo.all_reduce\n" + path.read_text())
    Golden(tmp_path, update=True).filecheck("pmap.checks.mlir", forms["partition"])
    new = path.read_text()
    assert new.startswith("// A note kept by hand.\n// HAND: mhlo.all_reduce\n// CHECK-GEN-BEGIN")
    assert new.count("CHECK-GEN-BEGIN") == 1 and "mhlo.partition_id" in new and "mhlo.replica_id" not in new
    with pytest.raises(pytest.fail.Exception, match="does not exist; create it with pytest --pxla-update-goldens"):
        Golden(tmp_path, update=False).filecheck("absent.mlir", text)


@pytest.mark.subprocess
def test_handoff_of_the_example_matches_its_filecheck_golden(pxla_golden, parse):
    from pxla_mlir.mlir.pass_infra import run_pipeline

    module = parse((REPO / "examples" / "per_device_psum.mlir").read_text())
    run_pipeline(module, "builtin.module(pxla-handoff-pipeline{mode=replica})")
    pxla_golden.filecheck("per_device_psum.handoff.mlir", str(module))
