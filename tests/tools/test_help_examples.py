"""Every example at the end of a --help runs as written: those of ``pxla-opt --help``, ``pxla-mlir --help`` and
each subcommand's, a block's lines in order in an empty directory, as a user copying them would (the files
they read come from ``pxla-mlir example NAME``). A line ending in ``# exit N`` documents its exit status."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

import pytest

from pxla_mlir.mlir.cli import pxla_opt
from pxla_mlir.tools import cli

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]

_EXIT = re.compile(r"#\s*exit (\d+)")


def _helps() -> dict[str, str]:
    """Each command's --help text, by the command line that prints it."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {"pxla-opt --help": pxla_opt.build_arg_parser().format_help(), "pxla-mlir --help": parser.format_help()}
    helps.update({f"pxla-mlir {name} --help": command.format_help() for name, command in sub.choices.items()})
    return helps


def example_lines(help_text: str) -> list[str]:
    """The lines of the help's "examples:" block, as a user would copy them."""
    lines = help_text.split("\n")
    start = lines.index("examples:") + 1
    block = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        block.append(line[2:])
    return block


def test_every_help_has_examples():
    for command, text in _helps().items():
        assert example_lines(text), f"{command} has no examples"


@pytest.mark.parametrize("command", sorted(_helps()))
def test_the_examples_of_a_help_run_as_written(command, tmp_path):
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("PXLA_REPRO_DIR", None)  # as a user has it: an example that wants one sets it
    for line in example_lines(_helps()[command]):
        expected = int(m[1]) if (m := _EXIT.search(line)) else 0
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == expected, f"{command}: {line}\nexit {proc.returncode}\n{proc.stderr[-2000:]}"
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
