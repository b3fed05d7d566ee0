"""The test runners: a shell command on a file per candidate (exit 0 is
interesting, ``{}`` is the file, a run past the timeout is killed), and the
built-in checks' worker processes (reports, plugins, a crash or a hang in a
pass, a plugin that does not load)."""

import os
import re
import textwrap
import time

import pytest

from pxla_mlir.mlir.reduce.evaluate import ShellRunner, command_for
from pxla_mlir.mlir.reduce.pipeline_check import CHECK
from pxla_mlir.mlir.reduce.workers import WorkerError, WorkerRunner

pytestmark = pytest.mark.subprocess

MODULE = """module {
  func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
"""


def test_the_path_is_substituted_or_appended():
    assert command_for("grep -q tanh {} && wc {}", "/a b/c.mlir") == "grep -q tanh '/a b/c.mlir' && wc '/a b/c.mlir'"
    assert command_for("./check.sh", "/x.mlir") == "./check.sh /x.mlir"


def test_a_shell_test_is_interesting_on_exit_0(tmp_path):
    runner = ShellRunner("grep -q stablehlo.tanh", directory=str(tmp_path), cwd=str(tmp_path),
                         wrap=lambda t: t + "// trailer\n")
    assert runner.test(MODULE).interesting
    no = runner.test(MODULE.replace("tanh", "negate"))
    assert not no.interesting and no.detail == "the test exits 1"
    said = ShellRunner("echo no such tool >&2; exit 3 # {}", directory=str(tmp_path)).test(MODULE)
    assert said.detail == "the test exits 3; its output ends with: no such tool"
    assert ShellRunner("grep -q '// trailer' {}", directory=str(tmp_path), wrap=lambda t: t + "// trailer\n") \
        .test(MODULE).interesting
    assert sorted(os.listdir(tmp_path)) == []  # the candidate files are gone


def test_a_shell_test_past_the_timeout_is_killed_with_what_it_started(tmp_path):
    runner = ShellRunner(f"sleep 30 & echo $! > {tmp_path}/pid; wait # {{}}", directory=str(tmp_path), timeout=0.5)
    start = time.monotonic()
    verdict = runner.test(MODULE)
    assert not verdict.interesting and "--timeout 0.5" in verdict.detail
    assert time.monotonic() - start < 10
    pid = int((tmp_path / "pid").read_text())
    assert _gone_within(pid, 10)  # the sleep the shell started went with it


def _gone_within(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` ends (or is a zombie waiting for init to reap it) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


PLUGIN = textwrap.dedent('''
    import dataclasses
    import os
    import time

    from pxla_mlir.passes import ModulePass, PassError


    @dataclasses.dataclass(frozen=True)
    class TroublePass(ModulePass):
        argument = "trouble"
        summary = "fails on tanh, aborts on negate, hangs on sine"

        def run(self, module):
            text = str(module)
            if "stablehlo.negate" in text:
                os.abort()
            if "stablehlo.sine" in text:
                time.sleep(60)
            if "stablehlo.tanh" in text:
                raise PassError(module, "tanh is trouble")
''')


@pytest.fixture
def trouble(tmp_path):
    path = tmp_path / "trouble.py"
    path.write_text(PLUGIN)
    spec = {"check": CHECK, "options": {"pipeline": "builtin.module(trouble)"}, "plugins": [str(path)]}
    runner = WorkerRunner(spec, directory=str(tmp_path), expect=re.compile("trouble"), timeout=5)
    yield runner
    runner.close()


def test_a_worker_reports_a_pipelines_errors_and_stays_up(trouble):
    report = trouble.report(MODULE)
    assert report["failures"] == ["tanh is trouble"]
    assert report["diagnostics"][0]["loc"] == ["-", 1, 1]
    assert trouble.test(MODULE).interesting
    quiet = trouble.test(MODULE.replace("tanh", "exponential"))
    assert not quiet.interesting and quiet.detail == "the pipeline succeeds"
    assert len(trouble._idle) == 1  # one worker served all three


def test_a_crash_is_the_candidates_failure_and_the_worker_is_replaced(trouble):
    report = trouble.report(MODULE.replace("tanh", "negate"))
    assert report["failures"] == ["crashed (signal 6)"]
    assert not trouble.test(MODULE.replace("tanh", "negate")).interesting  # 'trouble' is not in it
    assert trouble.report(MODULE)["failures"] == ["tanh is trouble"]  # a new worker


@pytest.mark.slow
def test_a_hang_is_killed_at_the_timeout(trouble):
    start = time.monotonic()
    report = trouble.report(MODULE.replace("tanh", "sine"))
    assert report == {"failures": [], "note": "the check ran past --timeout 5 s"}
    assert time.monotonic() - start < 30
    assert trouble.report(MODULE)["failures"] == ["tanh is trouble"]


def test_a_plugin_that_does_not_load_in_the_worker_is_one_error(tmp_path):
    spec = {"check": CHECK, "options": {"pipeline": "builtin.module(canonicalize)"},
            "plugins": [str(tmp_path / "missing.py")]}
    runner = WorkerRunner(spec, directory=str(tmp_path))
    with pytest.raises(WorkerError, match="does not exist"):
        runner.report(MODULE)
    runner.close()
