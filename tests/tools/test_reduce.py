"""pxla-mlir reduce end to end: each built-in test and the shell test reduce a
module to the part that still fails, the output parses, verifies and still
fails, the lit test it emits passes lit; the input is tested first; outputs
are written whole, only on success (or Ctrl-C, with the best so far); every
mistake is one line and exit 2."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.subprocess

BIN = os.path.dirname(sys.executable)
LLVM_FILECHECK = "/usr/lib/llvm-19/bin/FileCheck"
HANDOFF = "builtin.module(pxla-verify-handoff)"


def module_with_chain(steps: int = 40) -> str:
    """per_device_psum's ops (an all_reduce, erf, partition_id) among ``steps`` elementwise ops."""
    lines = ["module @chain attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {",
             "  func.func public @main(%x: tensor<3xf32>, %y: tensor<3xf32>) -> (tensor<3xf32>, tensor<i32>) {"]
    prev = "%x"
    for i in range(steps):
        if i == steps // 2:
            lines += [f"    %v{i} = chlo.erf {prev} : tensor<3xf32> -> tensor<3xf32>",
                      "    %p = stablehlo.partition_id : tensor<ui32>",
                      "    %q = stablehlo.convert %p : (tensor<ui32>) -> tensor<i32>"]
        else:
            lines.append(f"    %v{i} = stablehlo.{('add', 'multiply', 'maximum')[i % 3]} {prev}, %y : tensor<3xf32>")
        prev = f"%v{i}"
    lines += [f"    return {prev}, %q : tensor<3xf32>, tensor<i32>", "  }", "}"]
    return "\n".join(lines) + "\n"


def reduce(*args: str, cwd, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", ""), **(env or {})}
    return subprocess.run([os.path.join(BIN, "pxla-mlir"), "reduce", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=timeout)


def pxla_opt(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([os.path.join(BIN, "pxla-opt"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def op_count(text: str) -> int:
    """The ops of a printed module, as the reducer counts them (the module itself not counted)."""
    return len(re.findall(r"^\s*(?:%\S+ = )?\"?[a-z_]+\.[a-z_]+|^\s*return\b", text, re.M))


def run_lit(tmp_path, *tests, filecheck: str | None = None) -> subprocess.CompletedProcess:
    suite = tmp_path / "lit"
    suite.mkdir(exist_ok=True)
    (suite / "lit.cfg.py").write_text(textwrap.dedent("""
        import os
        import lit.formats

        config.name = "reduced"
        config.test_format = lit.formats.ShTest(execute_external=False)
        config.suffixes = [".mlir"]
        config.environment["PATH"] = os.environ["PATH"]
        filecheck = lit_config.params.get("FILECHECK")
        if filecheck:
            config.substitutions.append((r"(?<![\\w./-])filecheck(?=\\s|$)", filecheck))
    """))
    for test in tests:
        shutil.copy(test, suite)
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}
    argv = [os.path.join(BIN, "lit"), "-v", str(suite)] + ([f"-DFILECHECK={filecheck}"] if filecheck else [])
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)


def assert_passes_lit(tmp_path, test):
    for filecheck in (None, LLVM_FILECHECK if os.access(LLVM_FILECHECK, os.X_OK) else None):
        run = run_lit(tmp_path, test, filecheck=filecheck)
        assert run.returncode == 0 and "Passed: 1" in run.stdout, run.stdout[-3000:]
        if filecheck is None:
            break


def assert_clean(stderr: str):
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr


# -- the built-in pipeline test ------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_pipeline_keeps_failing_with_the_inputs_first_error(tmp_path):
    (tmp_path / "big.mlir").write_text(module_with_chain())
    run = reduce("big.mlir", "--pipeline", HANDOFF, "-o", "small.mlir", "--emit-lit-test", "small_test.mlir",
                 cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert_clean(run.stderr)
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 2  # no progress off a terminal: the start and the summary
    assert "while the test keeps its error: 'stablehlo.add' is not builtin/func/mhlo" in lines[0]
    assert re.search(r"big.mlir: 4\d ops -> \d ops in [\d.]+ s \(\d+ tested", lines[1]), lines[1]
    small = (tmp_path / "small.mlir").read_text()
    assert op_count(small) <= 4, small
    again = pxla_opt("small.mlir", "-p", HANDOFF, cwd=tmp_path)
    assert again.returncode == 1 and "'stablehlo.add' is not builtin/func/mhlo" in again.stderr
    assert_passes_lit(tmp_path, tmp_path / "small_test.mlir")


def test_expect_error_chooses_which_error_to_keep(tmp_path):
    (tmp_path / "big.mlir").write_text(module_with_chain())
    run = reduce("big.mlir", "--pipeline", HANDOFF, "--expect-error", r"'chlo\.erf'", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "chlo.erf" in run.stdout and "stablehlo.add" not in run.stdout  # -o - : stdout
    assert op_count(run.stdout) <= 3, run.stdout


def test_the_same_result_for_every_number_of_jobs(tmp_path):
    (tmp_path / "big.mlir").write_text(module_with_chain(60))
    outs = [reduce("big.mlir", "--pipeline", HANDOFF, "--jobs", jobs, cwd=tmp_path).stdout for jobs in ("1", "3")]
    assert outs[0] == outs[1] and outs[0]


PLUGIN = textwrap.dedent('''
    import dataclasses

    from jaxlib.mlir import ir

    from pxla_mlir.passes import ModulePass, PassError


    @dataclasses.dataclass(frozen=True)
    class NoNegatedSinesPass(ModulePass):
        """no-negated-sines: a pass with a bug: it gives up on a negate of a sine."""

        argument = "no-negated-sines"
        summary = "fails on stablehlo.negate(stablehlo.sine(x))"

        def run(self, module):
            found = []
            module.walk(lambda op: found.append(op.operation) or ir.WalkResult.ADVANCE)
            for op in found:
                if op.name == "stablehlo.negate" and "stablehlo.sine" in str(op.operands[0].owner):
                    raise PassError(op, "cannot fold a negated sine")
''')


def _plugin_module(tmp_path) -> str:
    (tmp_path / "passes.py").write_text(PLUGIN)
    chain = module_with_chain(30).replace(
        "    %v21 = stablehlo.add %v20, %y", "    %s = stablehlo.sine %v20 : tensor<3xf32>\n"
                                              "    %n = stablehlo.negate %s : tensor<3xf32>\n"
                                              "    %v21 = stablehlo.add %n, %y")
    assert "%n = stablehlo.negate" in chain
    (tmp_path / "big.mlir").write_text(chain)
    return chain


@pytest.mark.slow
def test_a_reproducer_brings_its_pipeline_plugins_and_error(tmp_path):
    _plugin_module(tmp_path)
    saved = pxla_opt("big.mlir", "--load-pass-plugin=passes.py", "-p", "builtin.module(canonicalize,no-negated-sines)",
                     "--mlir-pass-pipeline-crash-reproducer=repro.mlir", cwd=tmp_path)
    assert saved.returncode == 1 and "cannot fold a negated sine" in saved.stderr
    run = reduce("--from-reproducer", "repro.mlir", "-o", "small.mlir", "--emit-lit-test", "small_test.mlir",
                 cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    small = (tmp_path / "small.mlir").read_text()
    assert "pxla_plugins" in small and "no-negated-sines" in small  # still a reproducer
    assert op_count(small.split("{-#")[0]) <= 5
    replay = pxla_opt("--run-reproducer", "small.mlir", cwd=tmp_path)
    assert replay.returncode == 1 and "error: cannot fold a negated sine" in replay.stderr
    test = (tmp_path / "small_test.mlir").read_text()
    assert "--load-pass-plugin=" in test and "// expected-error @below {{cannot fold a negated sine}}" in test
    assert_passes_lit(tmp_path, tmp_path / "small_test.mlir")
    # A shell test gets the reproducer's trailer on every candidate: --run-reproducer works on them.
    run = reduce("repro.mlir", "--test", "pxla-opt --run-reproducer {} 2>&1 | grep -q 'negated sine'", "-o", "t.mlir",
                 cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "t.mlir").read_text().split("{-#")[0] == small.split("{-#")[0]


def test_progress_goes_to_a_terminal(tmp_path):
    import pty

    (tmp_path / "big.mlir").write_text(module_with_chain())
    leader, follower = pty.openpty()
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"]}
    env.pop("PXLA_NO_PROGRESS", None)
    proc = subprocess.Popen([os.path.join(BIN, "pxla-mlir"), "reduce", "big.mlir", "--pipeline", HANDOFF, "-o",
                             "small.mlir"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    said = b""
    while True:
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        said += chunk
    assert proc.wait(timeout=120) == 0
    os.close(leader)
    text = said.decode()
    assert re.search(r"\r\x1b\[Kreduce: \d+ ops left, \d+ tested in \d+ s; round 1, remove-ops", text), text
    assert re.search(r"\x1b\[Kpxla-mlir reduce: big.mlir: \d+ ops -> \d+ ops in .*written to small.mlir\s*$", text)


# -- a shell test ------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_shell_test_reduces_and_its_output_passes_it(tmp_path):
    _plugin_module(tmp_path)
    check = "pxla-opt {} --load-pass-plugin=passes.py -no-negated-sines 2>&1 | grep -q 'negated sine'"
    run = reduce("big.mlir", "--test", check, "-o", "small.mlir", "--emit-lit-test", "small_test.mlir", "--verbose",
                 cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "remove-ops: " in run.stderr  # --verbose: the reductions kept
    small = (tmp_path / "small.mlir").read_text()
    assert op_count(small) <= 4, small
    assert subprocess.run(["bash", "-c", check.replace("{}", "small.mlir")], cwd=tmp_path,
                          env={**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"]}).returncode == 0
    test = (tmp_path / "small_test.mlir").read_text()
    assert test.startswith("// RUN: bash -c 'pxla-opt %s --load-pass-plugin=passes.py")
    (tmp_path / "lit").mkdir()
    shutil.copy(tmp_path / "passes.py", tmp_path / "lit")  # the RUN line's relative path: from the test's folder
    assert_passes_lit(tmp_path, tmp_path / "small_test.mlir")


def test_the_input_is_tested_first_and_nothing_is_written_when_it_is_not_interesting(tmp_path):
    (tmp_path / "big.mlir").write_text(module_with_chain())
    (tmp_path / "out.mlir").write_text("before")
    run = reduce("big.mlir", "--test", "grep -q no_such_op", "-o", "out.mlir", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip() == ("pxla-mlir: error: big.mlir is not interesting: the test exits 1; the test must "
                                  "succeed on the input (try it: grep -q no_such_op big.mlir; exit 0 means "
                                  "interesting)")
    assert (tmp_path / "out.mlir").read_text() == "before"
    quiet = reduce("big.mlir", "--pipeline", "builtin.module(canonicalize)", cwd=tmp_path)
    assert quiet.returncode == 2 and "big.mlir is not interesting: the pipeline succeeds" in quiet.stderr


def test_a_test_that_reads_the_inputs_comments_is_refused(tmp_path):
    (tmp_path / "big.mlir").write_text("// keep me\n" + module_with_chain())
    run = reduce("big.mlir", "--test", "grep -q 'keep me'", cwd=tmp_path)
    assert run.returncode == 2 and "depends on the text's comments or layout" in run.stderr


def test_the_input_is_replaced_only_when_o_names_it(tmp_path):
    text = module_with_chain()
    (tmp_path / "big.mlir").write_text(text)
    run = reduce("big.mlir", "--pipeline", HANDOFF, cwd=tmp_path)
    assert run.returncode == 0 and (tmp_path / "big.mlir").read_text() == text
    printed = run.stdout
    run = reduce("big.mlir", "--pipeline", HANDOFF, "-o", "big.mlir", cwd=tmp_path)
    assert run.returncode == 0 and run.stdout == ""
    assert (tmp_path / "big.mlir").read_text() == printed
    os.chmod(tmp_path / "big.mlir", 0o640)
    assert reduce("big.mlir", "--pipeline", HANDOFF, "-o", "big.mlir", cwd=tmp_path).returncode == 0
    assert (tmp_path / "big.mlir").stat().st_mode & 0o777 == 0o640  # a replaced file keeps its permissions
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.mlir"]  # no temporary file left


@pytest.mark.slow
def test_ctrl_c_writes_the_smallest_interesting_module_so_far(tmp_path):
    (tmp_path / "big.mlir").write_text(module_with_chain(80))
    counter = tmp_path / "count"
    check = f"echo >> {counter}; sleep 0.3; grep -q chlo.erf {{}}"
    env = {**os.environ, "PATH": BIN + os.pathsep + os.environ["PATH"]}
    proc = subprocess.Popen([os.path.join(BIN, "pxla-mlir"), "reduce", "big.mlir", "--test", check, "-o", "out.mlir",
                             "--jobs", "2"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    # 16 tests started: the first reductions (all ops, then halves) have been kept by then, the last not yet
    while (not counter.exists() or len(counter.read_text().splitlines()) < 16) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted: out.mlir holds the smallest interesting module found so far" in err
    out = (tmp_path / "out.mlir").read_text()
    assert "chlo.erf" in out and 4 < op_count(out) < op_count(module_with_chain(80))
    assert not list(tmp_path.glob(".out.mlir.*"))


def test_a_test_past_the_timeout_is_not_interesting(tmp_path):
    (tmp_path / "big.mlir").write_text(module_with_chain())
    run = reduce("big.mlir", "--test", "sleep 10 # {}", "--timeout", "0.5", cwd=tmp_path)
    assert run.returncode == 2 and "the test ran past --timeout 0.5 s" in run.stderr


# -- XLA's compile, and results compared --------------------------------------------------------------------

XLA_REJECTS = """module {
  func.func public @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
    %0 = stablehlo.add %a, %b : tensor<3xf32>
    %1 = stablehlo.tanh %0 : tensor<3xf32>
    %2 = mhlo.custom_call @no_such_target(%1) : (tensor<3xf32>) -> tensor<3xf32>
    %3 = stablehlo.multiply %2, %a : tensor<3xf32>
    %4 = stablehlo.sine %b : tensor<3xf32>
    return %3, %4 : tensor<3xf32>, tensor<3xf32>
  }
}
"""


@pytest.mark.slow
def test_the_same_xla_compile_error(tmp_path):
    (tmp_path / "big.mlir").write_text(XLA_REJECTS)
    run = reduce("big.mlir", "--compile", "-o", "small.mlir", "--emit-lit-test", "small_test.mlir", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    small = (tmp_path / "small.mlir").read_text()
    assert "@no_such_target" in small and op_count(small) == 3  # the function, the custom call, the return
    assert_passes_lit(tmp_path, tmp_path / "small_test.mlir")


FLIP = textwrap.dedent('''
    import dataclasses

    from jaxlib.mlir import ir

    from pxla_mlir.passes import ModulePass


    @dataclasses.dataclass(frozen=True)
    class FlipSubtractPass(ModulePass):
        argument = "flip-subtract"
        summary = "a wrong rewrite: every subtract becomes an add"

        def run(self, module):
            found = []
            module.walk(lambda op: found.append(op.operation) or ir.WalkResult.ADVANCE)
            for op in [o for o in found if o.name.endswith(".subtract")]:
                add = ir.Operation.create(op.name.replace("subtract", "add"), results=[op.results[0].type],
                                          operands=list(op.operands), loc=op.location, ip=ir.InsertionPoint(op))
                op.results[0].replace_all_uses_with(add.results[0])
                op.erase()
''')
MISCOMPILED = XLA_REJECTS.replace("    %2 = mhlo.custom_call @no_such_target(%1) : (tensor<3xf32>) -> tensor<3xf32>",
                                  "    %c = stablehlo.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>\n"
                                  "    %2 = stablehlo.subtract %1, %c : tensor<3xf32>")


@pytest.mark.slow
@pytest.mark.parametrize("how", [["--compare-pipeline", "flip-subtract"],
                                 ["--pipeline", "flip-subtract", "--compare-jax"]], ids=["pipelines", "jax"])
def test_results_that_still_differ(tmp_path, how):
    (tmp_path / "flip.py").write_text(FLIP)
    (tmp_path / "big.mlir").write_text(MISCOMPILED)
    lit = ["--emit-lit-test", "small_test.mlir"] if "--compare-pipeline" in how else []
    run = reduce("big.mlir", "--load-pass-plugin", "flip.py", *how, "-o", "small.mlir", *lit, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "while the test keeps a result that differs" in run.stderr
    small = (tmp_path / "small.mlir").read_text()
    assert "subtract" in small and op_count(small) <= 3, small
    if lit:
        assert_passes_lit(tmp_path, tmp_path / "small_test.mlir")
    agree = reduce("big.mlir", "--compare-pipeline", "canonicalize", cwd=tmp_path)
    assert agree.returncode == 2 and "all 2 results agree" in agree.stderr


# -- mistakes --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["big.mlir"], "say what is interesting: --test CMD, --pipeline PIPELINE"),
    (["big.mlir", "--test", "true", "--compile"], "--test and --compile are two tests: give one"),
    (["big.mlir", "--test", "true", "--pipeline", "cse"], "--pipeline does not apply to --test"),
    (["big.mlir", "--test", "true", "--expect-error", "x"], "--expect-error applies to a pipeline's or XLA's errors"),
    (["--pipeline", "cse"], "give the module to reduce, IN.mlir"),
    (["big.mlir", "--from-reproducer", "big.mlir"], "--from-reproducer reads the module from the reproducer"),
    (["big.mlir", "--pipeline", "cse", "--expect-error", "("], "--expect-error '(' is not a regular expression"),
    (["big.mlir", "--pipeline", "no-such-pass"], "--pipeline: unknown pass or pipeline 'no-such-pass'"),
    (["big.mlir", "--pipeline", "cse", "-o", "."], "-o '.' is a directory"),
    (["big.mlir", "--pipeline", "cse", "--emit-lit-test", "big.mlir"], "would overwrite the input"),
    (["big.mlir", "--compare-jax", "--emit-lit-test", "t.mlir"], "--emit-lit-test has no RUN line for --compare-jax"),
    (["big.mlir", "--test", "true", "--rtol", "1"], "--seed, --rtol and --atol apply to --compare-pipeline and"),
    (["big.mlir", "--pipeline", "cse", "--seed", "1"], "--seed, --rtol and --atol apply to --compare-pipeline"),
    (["missing.mlir", "--test", "true"], "cannot read 'missing.mlir': No such file or directory"),
    (["big.mlir", "--test", " "], "--test needs a command"),
    (["big.mlir", "--test", "true", "-o", "no/such/dir/out.mlir"], "cannot write in"),
    (["broken.mlir", "--test", "true"], "broken.mlir:2:8: error: custom op 'stablehlo.bogus' is unknown"),
    (["--from-reproducer", "big.mlir"], "big.mlir records no pipeline"),
])
def test_mistakes_are_one_line_and_exit_2(tmp_path, argv, message):
    (tmp_path / "big.mlir").write_text(module_with_chain(4))
    (tmp_path / "broken.mlir").write_text("func.func @main() {\n  %0 = stablehlo.bogus : tensor<f32>\n  return\n}\n")
    run = reduce(*argv, cwd=tmp_path)
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1 and message in run.stderr, run.stderr
    assert run.stderr.startswith("pxla-mlir: error: ")
