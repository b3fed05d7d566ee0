"""pxla-mlir update-checks: generated blocks rewritten from the tests' RUN lines under their lit
config, everything else untouched, --check for CI, one-line errors that leave the test as it was."""

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO

from pxla_mlir.tools.check_capture import parse_args
from pxla_mlir.tools.update_checks import UpdateError, _split_markers, update, write

LIT = os.path.join(os.path.dirname(sys.executable), "lit")
LLVM_FILECHECK = shutil.which("FileCheck", path="/usr/lib/llvm-19/bin")
PSUM = (REPO / "examples" / "per_device_psum.mlir").read_text()
GATHER = textwrap.dedent("""\
    module @gather attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
      func.func public @main(%arg0: tensor<2x2xf32>) -> tensor<4x2xf32> {
        %0 = "stablehlo.all_gather"(%arg0) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> : (tensor<2x2xf32>) -> tensor<4x2xf32>
        return %0 : tensor<4x2xf32>
      }
    }
    """)
HANDOFF = "--pass-pipeline='builtin.module(pxla-handoff-pipeline{mode=partition})'"


@pytest.fixture
def suite(tmp_path):
    """A lit suite of its own: pxla_mlir's substitutions, a substitution of the suite's own, FILECHECK."""
    (tmp_path / "lit.cfg.py").write_text(textwrap.dedent("""\
        import os, sys
        import lit.formats
        from pxla_mlir.tools.lit_runs import pxla_substitutions
        config.name = "tmp"
        config.test_format = lit.formats.ShTest(execute_external=False)
        config.suffixes = [".mlir"]
        config.test_source_root = os.path.dirname(__file__)
        config.environment["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), config.environment["PATH"]])
        config.substitutions.append(("%handoff", "pxla-opt --pass-pipeline='builtin.module(pxla-handoff-pipeline)'"))
        config.substitutions += pxla_substitutions(sys.executable)
        fc = lit_config.params.get("FILECHECK")
        if fc:
            config.substitutions.append((r"(?<![\\w./-])filecheck(?=\\s|$)", f'"{fc}"'))
        """))
    (tmp_path / "chunks.py").write_text("print('module {\\n}\\n// -----\\n')\n")  # a second chunk prints nothing
    return tmp_path


def lit(path, *params):
    run = subprocess.run([LIT, "-a", str(path), *params], capture_output=True, text=True, timeout=300)
    return run.returncode, run.stdout + run.stderr


def without_blocks(text):
    """``text`` without its generated blocks (and the blank line update-checks puts after a new one),
    byte for byte: lines end where lit and FileCheck end them, at newlines."""
    out, inside, dropped = [], False, False
    for line in text.split("\n"):
        if "CHECK-GEN-BEGIN" in line:
            inside = True
        elif "CHECK-GEN-END" in line:
            inside, dropped = False, True
        elif not inside:
            if dropped and not line.strip():
                dropped = False
                continue
            out.append(line)
            dropped = False
    return "\n".join(out)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", "update-checks", *args],
                          capture_output=True, text=True, timeout=300)


TWO_RUNS = f"""\
// Two generated prefixes (one through the suite's own %handoff, one reading
// a %t file) and a hand-written one.
// RUN: %handoff %s | filecheck %s --check-prefix=GEN-REPLICA
// RUN: pxla-opt %s {HANDOFF} -o %t && filecheck %s --input-file=%t --check-prefix=GEN-PARTITION
// RUN: pxla-opt %s {HANDOFF} | filecheck %s --check-prefix=INTENT

// INTENT: mhlo.all_reduce{{{{.*}}}}use_global_device_ids
{PSUM}"""


@pytest.mark.subprocess
@pytest.mark.slow
def test_round_trip_keeps_everything_but_the_block(suite):
    test = suite / "psum.mlir"
    test.write_text(TWO_RUNS)
    result = update(str(test))
    assert result.stale
    write(result)
    new = test.read_text()
    assert without_blocks(new) == TWO_RUNS
    assert "// GEN-REPLICA-NEXT:      %[[REPLICA_ID:" in new and "// GEN-PARTITION-NEXT:      %[[PARTITION_ID:" in new
    assert "INTENT-" not in new and new.count("CHECK-GEN-BEGIN") == 1
    # The block sits above the input, below the comments.
    assert new.index("CHECK-GEN-END") < new.index("module @per_device_psum") and \
        new.index("// INTENT:") < new.index("CHECK-GEN-BEGIN")
    assert lit(test)[0] == 0, lit(test)[1]
    if LLVM_FILECHECK:
        code, out = lit(test, f"-DFILECHECK={LLVM_FILECHECK}")
        assert code == 0 and LLVM_FILECHECK in out, out
    assert not update(str(test)).stale  # idempotent
    # An intended change: --check sees it without writing, and only the block follows it.
    changed = new.replace("dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use", "dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>, use")
    test.write_text(changed)
    assert update(str(test), verify=False).stale and test.read_text() == changed
    write(update(str(test)))
    assert without_blocks(test.read_text()) == without_blocks(changed)
    assert "dense<{{\\[\\[}}0, 1], [2, 3]]> : tensor<2x2xi64>" in test.read_text() and lit(test)[0] == 0


@pytest.mark.subprocess
@pytest.mark.slow
def test_split_input_file_gets_a_block_per_chunk(suite):
    test = suite / "split.mlir"
    original = (f"// RUN: pxla-opt %s --split-input-file {HANDOFF} | filecheck %s --check-prefix=GEN\n"
                f"// RUN: pxla-opt %s --split-input-file {HANDOFF} | filecheck %s --check-prefix=HAND\n\n"
                f"{PSUM}\n// -----\n\n// HAND: mhlo.all_gather\n{GATHER}")
    test.write_text(original)
    write(update(str(test)))
    new = test.read_text()
    first, second = new.split("\n// -----\n")
    assert first.count("CHECK-GEN-BEGIN") == 1 and "GEN-LABEL: module @per_device_psum" in first
    assert second.count("CHECK-GEN-BEGIN") == 1 and "GEN-LABEL: module @gather" in second
    assert "@gather" not in first and "@per_device_psum" not in second
    assert without_blocks(new) == original
    assert lit(test)[0] == 0
    if LLVM_FILECHECK:
        assert lit(test, f"-DFILECHECK={LLVM_FILECHECK}")[0] == 0


BAD = {  # name: (test text, error message pattern)
    "no_run_line": (PSUM, r"^no RUN line \(add one, e\.g\. '// RUN: pxla-opt %s \| filecheck %s'\)$"),
    "run_line_fails": ("// RUN: pxla-opt %s | filecheck %s\nmodule {\n  bogus\n}\n",
                       r"^RUN line failed \(exit 1\): .*bad\.mlir:3:3: error: custom op 'bogus' is unknown"),
    "empty_chunk": ("// RUN: %python %S/chunks.py --split-input-file | filecheck %s\nmodule {\n}\n// -----\nmodule {\n}\n",
                    r"^RUN line 1 prints nothing for chunk 2 \(from line 5\): no checks to generate$"),
    "dropped_chunk": ("// RUN: pxla-opt %s --split-input-file --verify-diagnostics | filecheck %s\nmodule {\n}\n"
                      "// -----\n// expected-error @+2 {{custom op}}\nmodule {\n  bogus\n}\n",
                      r"^RUN line 1 prints 1 chunk\(s\) for the test's 2 \('// -----'\); every chunk must print"),
    "only_hand_written": ("// RUN: pxla-opt %s | filecheck %s\n// CHECK: module\nmodule {\n}\n",
                          r"^every prefix the RUN lines check \(CHECK\) has hand-written checks; add a RUN line"),
    "no_filecheck_of_the_test": ("// RUN: pxla-opt %s -o %t\nmodule {\n}\n",
                                 r"^no RUN line pipes into a FileCheck of this test"),
    "prefix_shared_by_other_outputs": (
        f"// RUN: pxla-opt %s | filecheck %s --check-prefix=GEN\n// RUN: pxla-opt %s {HANDOFF} | filecheck %s "
        f"--check-prefix=GEN\n{PSUM}", r"^RUN line 1 prints other text than RUN line 2, which also checks prefix GEN"),
    "prefix_left_without_checks": ("// RUN: pxla-opt %s | filecheck %s --check-prefixes=CHECK,GEN\nmodule {\n}\n",
                                   r"^RUN line 1 checks prefix GEN, which would have no check line \(LLVM's FileCheck "),
    "unbalanced_markers": ("// RUN: pxla-opt %s | filecheck %s\n// CHECK-GEN-BEGIN\nmodule {\n}\n",
                           r"^CHECK-GEN-BEGIN without a CHECK-GEN-END after it$"),
    "bad_check_prefix": ("// RUN: pxla-opt %s | filecheck %s --check-prefix=GEN.1\nmodule {\n}\n",
                         r"^RUN line 1: FileCheck rejects its options: the check prefix 'GEN\.1' is not letters, "
                         r"digits, '-' and '_'; fix --check-prefix\(es\) on the RUN line$"),
    "empty_check_prefix": ("// RUN: pxla-opt %s | filecheck %s --check-prefix=\nmodule {\n}\n",
                           r"^RUN line 1: FileCheck rejects its options: the check prefix '' is not letters"),
    "check_prefix_twice": ("// RUN: pxla-opt %s | filecheck %s --check-prefixes=GEN,GEN\nmodule {\n}\n",
                           r"^RUN line 1: FileCheck rejects its options: the check prefix GEN is named twice; fix "),
    "option_filecheck_rejects": ("// RUN: pxla-opt %s | filecheck %s --no-such-option\nmodule {\n}\n",
                                 r"^RUN line 1: its FileCheck fails whatever the checks \(.*--no-such-option.*\): "
                                 r"fix the FileCheck options on the RUN line; the test is unchanged$"),
    "split_at_two_markers": ("// RUN: pxla-opt %s --split-input-file | filecheck %s --check-prefix=A\n"
                             "// RUN: pxla-opt %s --split-input-file=//== | filecheck %s --check-prefix=B\n"
                             "module {\n}\n", r"^the RUN lines split the test at different markers \('// -----', "
                                              r"'//=='\); give them one --split-input-file$"),
    "not_utf8": ("// RUN: pxla-opt %s | filecheck %s\n// caf\xe9\nmodule {\n}\n",
                 r"^the test is not UTF-8 \(byte 0xe9 at offset 41\); save it as UTF-8$"),
    "output_follows_the_checks": ("// RUN: grep -v RUN %s | filecheck %s\nmodule {\n}\n",
                                  r"^the RUN lines print other text each time the generated blocks are rewritten "
                                  r"\(3 times\): their output must not depend on the checks; the test is unchanged$"),
    "hand_written_across_labels": (
        "// RUN: pxla-opt %s | filecheck %s --check-prefixes=HAND,GEN\n// HAND: func.func @g\n"
        "module {\n  func.func @f() {\n    return\n  }\n  func.func @g() {\n    return\n  }\n}\n",
        r"^the new checks would fail RUN line 1 \(.*\): its hand-written HAND checks may not fit between the "
        r"generated CHECK-LABELs; give the generated prefix a RUN line of its own; the test is unchanged$"),
}
LINES = {"no_run_line": None, "empty_chunk": 5, "unbalanced_markers": 2, "not_utf8": None,
         "output_follows_the_checks": None}


@pytest.mark.parametrize("name", sorted(BAD))
@pytest.mark.subprocess
def test_bad_inputs_are_one_line_errors_and_leave_the_test_alone(suite, name):
    text, pattern = BAD[name]
    test = suite / "bad.mlir"
    test.write_bytes(text.encode("latin-1"))
    with pytest.raises(UpdateError) as e:
        update(str(test))
    message = str(e.value)
    assert "\n" not in message and re.search(pattern, message), message
    assert e.value.line == LINES.get(name, 1)
    assert test.read_bytes() == text.encode("latin-1")


@pytest.mark.subprocess
@pytest.mark.slow
def test_cli_reports_every_test_and_writes_only_the_good_ones(suite):
    good, stale, broken = suite / "good.mlir", suite / "stale.mlir", suite / "broken.mlir"
    for path in (good, stale):
        path.write_text(f"// RUN: pxla-opt %s | filecheck %s\n{PSUM}")
    write(update(str(good)))
    broken.write_text("// RUN: pxla-opt %s | filecheck %s\nmodule {\n  bogus\n}\n")
    before = {p: p.read_text() for p in (good, stale, broken)}
    check = cli("--check", str(good), str(stale), str(broken))
    assert check.returncode == 2  # a broken test is a mistake, whatever else is stale
    assert check.stdout == f"{stale}: generated checks are stale (run: pxla-mlir update-checks {stale})\n"
    assert re.fullmatch(rf"pxla-mlir: error: {re.escape(str(broken))}:1: RUN line failed \(exit 1\): [^\n]*custom op "
                        r"'bogus' is unknown[^\n]*\n", check.stderr), check.stderr
    assert {p: p.read_text() for p in before} == before
    assert cli("--check", str(good), str(stale)).returncode == 1  # stale, and nothing else: 1
    # A directory means its tests that have a generated block: only good.mlir here.
    assert cli("--check", str(suite)).returncode == 0
    run = cli(str(stale), str(broken))
    assert run.returncode == 2 and run.stdout == f"updated {stale}\n" and "CHECK-GEN-BEGIN" in stale.read_text()
    assert broken.read_text() == before[broken]


@pytest.mark.parametrize("args, message", [
    (["--check", "latin1.mlir"], r"latin1\.mlir: the test is not UTF-8 \(byte 0xe9 at offset 3\); save it as UTF-8"),
    (["nowhere.mlir"], r"cannot open 'nowhere\.mlir': no such file or directory"),
    (["--check"], r"the following arguments are required: TEST"),
    (["--no-such-flag", "latin1.mlir"], r"unrecognized arguments: --no-such-flag"),
])
@pytest.mark.subprocess
def test_cli_mistakes_exit_2_not_1_which_means_stale(suite, args, message):
    (suite / "latin1.mlir").write_bytes(b"// \xe9\n")
    run = subprocess.run([sys.executable, "-m", "pxla_mlir.tools.cli", "update-checks", *args], cwd=suite,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and run.stdout == "", run
    assert re.fullmatch(rf"pxla-mlir: error: {message}[^\n]*\n", run.stderr), run.stderr


def lit_passes_under_both_filechecks(test):
    code, out = lit(test)
    assert code == 0, out
    if LLVM_FILECHECK:
        code, out = lit(test, f"-DFILECHECK={LLVM_FILECHECK}")
        assert code == 0 and LLVM_FILECHECK in out, out


@pytest.mark.subprocess
@pytest.mark.slow
def test_diagnostics_name_the_lines_of_the_test_as_written(suite):
    # The new block moves the input down, and a block that changes size moves it again: the checks
    # name the lines where the input ends up, at once (--check agrees).
    test = suite / "diag.mlir"
    test.write_text("// RUN: not pxla-opt %s 2>&1 | filecheck %s\n// A comment.\nmodule {\n  bogus\n}\n")
    for _ in range(2):
        write(update(str(test)))
        new = test.read_text()
        line = new.split("\n").index("  bogus") + 1
        assert f"// CHECK:       {{{{.*}}}}diag.mlir:{line}:3: error: custom op 'bogus' is unknown" in new, new
        assert not update(str(test), verify=False).stale
        lit_passes_under_both_filechecks(test)
        test.write_text(new.replace("// CHECK-GEN-END", "// CHECK-NEXT: a stale line\n// CHECK-GEN-END"))


BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # str.splitlines breaks lines there; lit, FileCheck and MLIR do not


@pytest.mark.subprocess
def test_every_byte_outside_the_blocks_stays(suite):
    # CRLF lines, one LF line, comments holding what str.splitlines takes for line breaks, no final newline.
    test = suite / "bytes.mlir"
    text = (f"// RUN: pxla-opt %s {HANDOFF} | filecheck %s\r\n"
            + "".join(f"// {ord(c):#x}: a{c}b\r\n" for c in BREAKS)
            + "// a line that ends in LF alone\n" + PSUM.rstrip("\n").replace("\n", "\r\n"))
    test.write_bytes(text.encode())
    write(update(str(test)))
    new = test.read_bytes().decode()
    assert without_blocks(new) == text
    assert [line for line in new.split("\n")[:-1] if not line.endswith("\r")] == ["// a line that ends in LF alone"]
    assert "CHECK-LABEL: module @per_device_psum" in new and not update(str(test)).stale
    lit_passes_under_both_filechecks(test)


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_linked_test_is_updated_through_its_link(suite):
    (suite / "targets").mkdir()
    target, link = suite / "targets" / "psum.txt", suite / "link.mlir"
    target.write_text(f"// RUN: pxla-opt %s | filecheck %s\n{PSUM}")
    link.symlink_to(os.path.join("targets", "psum.txt"))
    write(update(str(link)))
    assert link.is_symlink() and "CHECK-GEN-BEGIN" in target.read_text()
    assert cli("--check", str(link)).returncode == 0
    lit_passes_under_both_filechecks(link)


@pytest.mark.subprocess
@pytest.mark.slow
def test_the_run_lines_split_markers_are_honoured(suite):
    # '// -----' splits nothing here: the RUN lines split at '// ====', and one prints '// ++++' between outputs.
    test = suite / "markers.mlir"
    original = (f"// RUN: pxla-opt %s --split-input-file='// ====' {HANDOFF} | filecheck %s --check-prefix=A\n"
                f"// RUN: pxla-opt %s -split-input-file='// ====' --output-split-marker '// ++++' {HANDOFF} "
                f"| filecheck %s --check-prefix=B\n\n{PSUM}// ==== the gather\n// -----\n{GATHER}")
    test.write_text(original)
    write(update(str(test)))
    new = test.read_text()
    first, second = new.split("// ==== the gather\n")
    assert first.count("CHECK-GEN-BEGIN") == 1 and "A-LABEL: module @per_device_psum" in first
    assert second.count("CHECK-GEN-BEGIN") == 1 and "B-LABEL: module @gather" in second
    assert "@gather" not in first and "@per_device_psum" not in second and without_blocks(new) == original
    lit_passes_under_both_filechecks(test)


def test_split_markers_are_read_in_every_spelling():
    assert _split_markers("opt x --split-input-file | fc") == ("// -----", "// -----")
    assert _split_markers("opt x -split-input-file='// ==' --output-split-marker '// ++' | fc") == ("// ==", "// ++")
    assert _split_markers("opt x --split-input-file=//== -output-split-marker=//++") == ("//==", "//++")
    assert _split_markers("opt x | fc") == (None, "// -----")


@pytest.mark.subprocess
def test_a_test_outside_any_lit_suite_gets_pxla_mlirs_substitutions(tmp_path):
    test = tmp_path / "alone.mlir"
    text = f"// RUN: pxla-opt %s {HANDOFF} | filecheck %s\n{PSUM}".replace("\n", "\r\n")  # and keeps CRLF
    test.write_bytes(text.encode())
    new = update(str(test)).new
    assert "// CHECK-NEXT:      %[[PARTITION_ID:" in new and without_blocks(new) == text
    assert new.count("\n") == new.count("\r\n")


@pytest.mark.subprocess
@pytest.mark.slow
def test_the_projects_generated_blocks_are_up_to_date():
    run = cli("--check", str(REPO / "test" / "lit"))
    assert run.returncode == 0, f"{run.stdout}{run.stderr}(regenerate with: make update-checks)"
    make = subprocess.run(["make", "-n", "update-checks"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert make.returncode == 0 and "update-checks test/lit" in make.stdout


def test_filecheck_arguments_are_read_in_every_spelling():
    a = parse_args(["%s", "--check-prefixes=A,B", "-check-prefix", "C", "--input-file", "x", "--dump-input=fail"])
    assert (a.check_file, a.check_index, a.prefixes, a.input_file, a.input_indices) == ("%s", 0, ["A", "B", "C"], "x", (4, 5))
    b = parse_args(["--check-prefix=P", "t.mlir", "-input-file=y"])
    assert (b.check_file, b.check_index, b.prefixes, b.input_file, b.input_indices) == ("t.mlir", 1, ["P"], "y", (2,))
    assert parse_args(["t.mlir"]).prefixes == ["CHECK"]


def test_every_filecheck_is_captured_but_one_expected_to_fail():
    from pxla_mlir.tools.lit_runs import _with_capture

    shim = f'"{sys.executable}" "{REPO / "pxla_mlir" / "tools" / "check_capture.py"}"'
    assert _with_capture("a %s | filecheck %s") == f"a %s | {shim} filecheck %s"
    assert _with_capture('a -o %t && "/x/bin/FileCheck" %s --input-file=%t') == \
        f'a -o %t && {shim} "/x/bin/FileCheck" %s --input-file=%t'
    assert _with_capture("not filecheck %t.c --input-file=%t") == "not filecheck %t.c --input-file=%t"
    assert _with_capture("a | not --crash FileCheck-19 %s") == "a | not --crash FileCheck-19 %s"


@pytest.mark.subprocess
def test_a_run_line_that_loads_a_pass_plugin(suite):
    """update-checks runs the RUN line as lit does: the plugin's pass, given by --load-pass-plugin=%S/..., runs."""
    (suite / "tag.py").write_text((REPO / "test" / "lit" / "plugins" / "Inputs" / "tag_functions.py").read_text())
    test = suite / "tagged.mlir"
    test.write_text("// RUN: pxla-opt %s --load-pass-plugin=%S/tag.py -tag-functions='n=7' | filecheck %s\n"
                    "// CHECK-GEN-BEGIN\n// CHECK-GEN-END\n"
                    "func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {\n"
                    "  return %a : tensor<3xf32>\n}\n")
    write(update(str(test)))
    assert "--load-pass-plugin=%S/tag.py" in test.read_text()  # the RUN line stays as written
    assert "plugin.tag = 7 : i64" in test.read_text() and lit(test)[0] == 0
