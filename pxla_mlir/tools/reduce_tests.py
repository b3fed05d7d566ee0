"""The test ``pxla-mlir reduce`` reduces against, chosen by its flags: a shell
command, or a built-in check in worker processes with what it expects, and the
lit test each one's reduced module becomes.

Every built-in check but the comparisons expects, unless ``--expect-error``
says otherwise, the error the input gives: a pipeline's first error message as
it is, XLA's with its numbers free (instruction names and ids change as the
module shrinks). A comparison expects a result that differs.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
from collections.abc import Callable
from typing import Any

from pxla_mlir.mlir.reduce import lit_test
from pxla_mlir.mlir.reduce.evaluate import Runner, ShellRunner, Verdict
from pxla_mlir.mlir.reduce.pipeline_check import CHECK, diagnostic_from_dict
from pxla_mlir.mlir.reduce.workers import WorkerRunner, matches
from pxla_mlir.tools.errors import CliError
from pxla_mlir.tools.reduce_checks import COMPARE, COMPILE

__all__ = ["Test", "build_test"]

#: The failures of a comparison (a crash of the check is none).
_DIFFERS = re.compile(r"^result \d+ ")


@dataclasses.dataclass
class Test:
    """A test and how to describe it: ``mode`` is test, pipeline, reproducer, compile or compare."""

    mode: str
    runner: Runner
    pipeline: str | None = None
    plugins: tuple[str, ...] = ()
    verify_each: bool = False
    command: str = ""
    other: str | None = None  # compare: the other pipeline (None: jax's run)
    args: Any = None
    expecting: str = ""  # what the reduction keeps, for the start message

    def first_verdict(self, text: str) -> Verdict:
        """Tests the input (the built-in checks learn what to expect from it)."""
        if not isinstance(self.runner, WorkerRunner):
            return self.runner.test(text)
        report = self.runner.report(text)
        failures = report.get("failures") or []
        if self.runner.expect is None and self.mode != "compare":
            if not failures:
                return Verdict(False, report.get("note") or "it does not fail")
            self.runner.expect = _expected(failures[0], numbers_free=self.mode == "compile")
            self.expecting = f"its error: {failures[0]}" + (" (numbers free)" if self.mode == "compile" else "")
        if not matches(report, self.runner.expect):
            if failures and self.runner.expect is not None and self.mode != "compare":
                return Verdict(False, f"its errors do not match --expect-error {self.runner.expect.pattern!r}: "
                                      f"{failures[0]!r}")
            return Verdict(False, report.get("note") or (failures[0] if failures else "it does not fail"))
        if self.mode == "compare":
            self.expecting = "a result that differs"
        elif not self.expecting and self.runner.expect is not None:
            self.expecting = f"an error matching {self.runner.expect.pattern!r}"
        return Verdict(True)

    def lit(self, text: str, note: str) -> str:
        """The reduced module ``text`` as a lit test."""
        if self.mode == "test":
            return lit_test.command_test(text, self.command, note=note)
        if self.mode in ("pipeline", "reproducer"):
            assert isinstance(self.runner, WorkerRunner) and self.pipeline is not None
            diagnostics = [diagnostic_from_dict(d) for d in self.runner.report(text).get("diagnostics", ())]
            return lit_test.pipeline_test(text, self.pipeline, diagnostics, plugins=self.plugins,
                                          verify_each=self.verify_each, note=note)
        flags = [f"--load-pass-plugin={shlex.quote(p)}" for p in self.plugins]
        if self.pipeline is not None:
            flags.append(f"--pipeline {shlex.quote(self.pipeline)}")
        if self.mode == "compile":
            assert isinstance(self.runner, WorkerRunner)
            failures = self.runner.report(text).get("failures") or ["XLA rejected the module"]
            run = f"not pxla-mlir run %s {_flags(flags)}2>&1 | filecheck %s"
            # the check's messages name the candidate "module"; pxla-mlir run names the test's path instead
            return lit_test.checked_test(text, run, [lit_test.filecheck_text(failures[0].split(": ", 1)[-1])],
                                         note=note)
        a = self.args
        flags += [f"--{k} {getattr(a, k)!r}" for k in ("seed", "rtol", "atol") if getattr(a, k) is not None]
        flags.append(f"--compare-pipeline {shlex.quote(self.other or '')}")  # cmd_reduce refuses --compare-jax
        return lit_test.checked_test(text, f"not pxla-mlir run %s {_flags(flags)}| filecheck %s", ["DIFFER"],
                                     note=note)


def _flags(flags: list[str]) -> str:
    return "".join(f"{lit_test.lit_command(f)} " for f in flags)


def _expected(failure: str, *, numbers_free: bool) -> re.Pattern:
    pattern = re.escape(failure)
    if numbers_free:
        pattern = re.sub(r"\d+", r"\\d+", pattern)
    return re.compile(pattern)


def _regex(text: str | None) -> re.Pattern | None:
    if text is None:
        return None
    try:
        return re.compile(text)
    except re.error as e:
        raise CliError(f"--expect-error {text!r} is not a regular expression: {e} (escape special characters, "
                       f"e.g. '\\(' for a parenthesis)") from None


def build_test(mode: str, args: argparse.Namespace, *, directory: str, pipeline: str | None, plugins: tuple[str, ...],
               verify_each: bool, wrap: Callable[[str], str] | None = None) -> Test:
    """The test of ``mode`` (see :class:`Test`); ``wrap`` makes a shell test's candidate files from the texts."""
    timeout = args.timeout or None
    if mode == "test":
        return Test(mode, ShellRunner(args.test, directory=directory, cwd=os.getcwd(), timeout=timeout,
                                      wrap=wrap), command=args.test)
    expect = _regex(args.expect_error)
    if mode in ("pipeline", "reproducer"):
        assert pipeline is not None
        spec = {"check": CHECK, "options": {"pipeline": pipeline, "verify_each": verify_each}}
    elif mode == "compile":
        spec = {"check": COMPILE, "options": {"pipeline": pipeline}}
    else:
        expect = _DIFFERS
        spec = {"check": COMPARE, "options": {"pipeline": pipeline, "other": args.compare_pipeline,
                                              "seed": args.seed or 0,
                                              "rtol": 1e-5 if args.rtol is None else args.rtol,
                                              "atol": 1e-8 if args.atol is None else args.atol}}
    spec["plugins"] = list(plugins)
    runner = WorkerRunner(spec, directory=directory, expect=expect, timeout=timeout)
    return Test(mode, runner, pipeline=pipeline, plugins=plugins, verify_each=verify_each,
                other=args.compare_pipeline, args=args)
