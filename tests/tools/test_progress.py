"""Long commands say what they are doing on stderr when it is a terminal (a pty here), and nothing when it is not:
emit of a compiled stage, explore, run of a module file, update-checks over a suite."""

from __future__ import annotations

import fcntl
import os
import pathlib
import pty
import select
import struct
import subprocess
import sys
import tempfile
import termios

import pytest
from conftest import REPO

from pxla_mlir.tools import progress

BIN = os.path.dirname(sys.executable)
PSUM = str(REPO / "examples/per_device_psum.mlir")
NESTED = str(REPO / "examples/nested_reduction.py") + ":two_level_sum"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PXLA_NO_PROGRESS", "NO_COLOR")}
    return dict(env, TERM="xterm", PATH=os.pathsep.join([BIN, env.get("PATH", "")]))


def on_terminal(argv: list[str], cwd) -> tuple[int, str, str]:
    """Runs ``argv`` with stderr on a pty (200 columns), stdout to a file: (exit status, stdout, what the terminal
    got). The pty is read while the command runs, so a long spinner never fills it."""
    master, slave = pty.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
    seen = b""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=slave, stdin=subprocess.DEVNULL, cwd=cwd, env=_env())
        os.close(slave)
        try:
            while True:
                if select.select([master], [], [], 1)[0]:
                    try:
                        chunk = os.read(master, 65536)
                    except OSError:  # EIO: the command closed the terminal
                        break
                    if not chunk:
                        break
                    seen += chunk
                elif proc.poll() is not None:
                    break
        finally:
            os.close(master)
            proc.wait(timeout=300)
        out.seek(0)
        return proc.returncode, out.read().decode(), seen.decode(errors="replace")


def _suite(folder) -> str:
    """A lit suite of one test whose checks update-checks writes."""
    (folder / "lit.cfg.py").write_text("import os\nimport lit.formats\nconfig.name = 's'\n"
                                       "config.test_format = lit.formats.ShTest(execute_external=False)\n"
                                       "config.suffixes = ['.mlir']\nconfig.environment['PATH'] = os.environ['PATH']\n")
    (folder / "psum.mlir").write_text("// RUN: pxla-opt %s -p 'builtin.module(pxla-handoff-pipeline)' | filecheck %s\n"
                                      "// CHECK-GEN-BEGIN\n// CHECK-GEN-END\n" + pathlib.Path(PSUM).read_text())
    return str(folder)


#: command, what its terminal shows while it works
COMMANDS = {
    "emit a compiled stage": ([f"{BIN}/pxla-mlir", "emit", NESTED, "--stage", "xla"],
                              ["loading ", "lowering ", "compiling "]),
    "emit a module's compiled stage": ([f"{BIN}/pxla-mlir", "emit", PSUM, "--stage", "xla"],
                                       [f"loading {PSUM}", f"compiling {PSUM} for 4 devices"]),
    "run a module": ([f"{BIN}/pxla-mlir", "run", PSUM, "--calls", "2"],
                     [f"loading {PSUM}", f"compiling {PSUM}", "timing 2 calls"]),
    "explore": ([f"{BIN}/pxla-mlir", "explore", NESTED, "-o", "page.html"],
                ["lowering ", "replaying the passes and compiling "]),
    "update-checks over a suite": ([f"{BIN}/pxla-mlir", "update-checks", "--check", "suite"],
                                   ["update-checks: running the RUN lines of suite/psum.mlir (1 of 1)"]),
}


@pytest.mark.subprocess
@pytest.mark.slow
@pytest.mark.parametrize("name", COMMANDS)
def test_a_long_command_says_what_it_does_on_a_terminal_only(name, tmp_path):
    argv, shown = COMMANDS[name]
    (tmp_path / "suite").mkdir()
    _suite(tmp_path / "suite")
    status, out, terminal = on_terminal(argv, tmp_path)
    assert status in (0, 1), terminal  # update-checks --check: 1, the block is stale
    for text in shown:
        assert text in terminal, (text, terminal[-3000:])
    piped = subprocess.run(argv, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    assert piped.returncode == status, piped.stderr
    assert piped.stdout == out or name.startswith("run"), (out, piped.stdout)  # run's timings differ
    for text in shown:
        assert text not in piped.stderr, piped.stderr
    assert "\x1b[" not in piped.stderr  # no terminal control codes in a file either


def test_nothing_is_shown_when_stderr_is_not_a_terminal(capsys):
    assert not sys.stderr.isatty()
    with progress.status("compiling"):
        print("result")
    assert capsys.readouterr() == ("result\n", "")


def test_a_status_inside_another_changes_the_text_and_puts_it_back(monkeypatch, capsys):
    monkeypatch.setattr(progress, "enabled", lambda: True)
    with progress.status("loading f"):
        assert progress._shown.text == "loading f"
        with progress.status("compiling f"):
            assert progress._shown.text == "compiling f"
        assert progress._shown.text == "loading f"
        print("result")  # stdout stays stdout while the spinner runs
    assert progress._shown.live is None
    assert capsys.readouterr().out == "result\n"
