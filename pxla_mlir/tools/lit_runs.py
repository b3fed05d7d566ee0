"""A test's RUN lines run as lit runs them, with what each FileCheck would read captured.

The test's lit suite (the ``lit.cfg.py`` above it) gives the substitutions,
environment and shell, so ``%s``, ``%t``, ``not`` and a suite's own tools mean
what they mean under lit; a file outside any suite gets pxla_mlir's
substitutions (``pxla-opt``, ``pxla-mlir``, ``%python``). Every FileCheck
(``filecheck``, ``FileCheck``, any path to one) runs as ``check_capture.py``,
which saves its input and succeeds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from pxla_mlir.tools.check_capture import FileCheckArgs, parse_args

_SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_capture.py")
# A command word naming FileCheck: bare, a path to one, quoted or not.
_FILECHECK_WORD = re.compile(r"""
    (?:(?<=^)|(?<=[\s|&;(]))                                  # at a word start
    (["']?) (?:[^\s"'|&;()]*/)? (?:FileCheck|filecheck)(?:-\d+)? \1
    (?=$|[\s|&;)])""", re.X)
_NOT = re.compile(r"(?:^|[\s|&;(])not(?:\s+--crash)?\s+$")
_DBG = re.compile(r"%dbg\([^)'\"]*\)((?:.|\n)*)")


def pxla_substitutions(python: str) -> list[tuple[str, str]]:
    """lit substitutions for this checkout's tools under ``python`` (test/lit/lit.cfg.py uses them too)."""
    return [
        # %python must be defined here: lit's built-in %p would otherwise eat it.
        ("%python", f'"{python}"'),
        # The bare word pxla-opt (not pass names like pxla-opt-foo) runs the driver with this interpreter.
        (r"(?<![\w./-])pxla-opt(?=\s|$)", f'"{python}" -m pxla_mlir.mlir.cli.pxla_opt'),
        (r"(?<![\w./-])pxla-mlir(?=\s|$)", f'"{python}" -m pxla_mlir.tools.cli'),
    ]


class RunError(Exception):
    """A test whose RUN lines cannot give check inputs: a one-line message, and the line it is about."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class RunLine:
    line: int  # 1-based line of its RUN:
    command: str  # after lit's substitutions


@dataclass(frozen=True)
class Capture:
    """What one FileCheck of a RUN line would have checked."""

    run: RunLine
    filecheck: str  # the FileCheck the RUN line names, resolved on its PATH
    args: tuple[str, ...]
    cwd: str
    input: str

    @property
    def parsed(self) -> FileCheckArgs:
        return parse_args(list(self.args))

    def checks(self, path: str) -> bool:
        """Whether this FileCheck reads its checks from the file ``path``."""
        check_file = self.parsed.check_file
        return check_file is not None and os.path.realpath(os.path.join(self.cwd, check_file)) == os.path.realpath(path)


#: How to get what update-checks runs: lit, and the PyPI filecheck its RUN lines pipe into.
INSTALL_HINT = "pip install 'pxla-mlir[lit]' (brings lit and filecheck)"
#: The oldest lit update-checks works with: the lit extra's floor (tests/tools/test_lit_floor.py runs it there).
LIT_FLOOR = (18, 1, 1)


def have_lit() -> bool:
    import importlib.util

    return importlib.util.find_spec("lit") is not None


def _lit():
    try:
        import lit.discovery
        import lit.formats
        import lit.LitConfig
        import lit.Test
        import lit.TestingConfig
        import lit.TestRunner
    except ImportError:
        raise RunError(f"update-checks needs lit, which is not installed: {INSTALL_HINT}") from None
    found = tuple(int(part) for part in re.findall(r"\d+", str(getattr(lit, "__version__", "0")))[:3])
    if found < LIT_FLOOR:
        raise RunError(f"update-checks needs lit {'.'.join(map(str, LIT_FLOOR))} or later (it drives lit's "
                       f"internals, which older releases spell otherwise), found lit {lit.__version__} at "
                       f"{os.path.dirname(lit.__file__ or '')}: pip install --upgrade 'pxla-mlir[lit]'")
    return lit


def _lit_config():
    lit = _lit()

    class Config(lit.LitConfig.LitConfig):
        def error(self, message):  # lit would print and count; one located error is clearer
            raise RunError(f"lit: {message}")

        def fatal(self, message):
            raise RunError(f"lit: {message}")

    # lit 23 replaced the flag quiet with diagnostic_level (lit 18 takes quiet; the lit extra's floor is 18.1.1).
    import inspect

    quiet: dict[str, Any] = {"diagnostic_level": "error"} \
        if "diagnostic_level" in inspect.signature(Config).parameters else {"quiet": True}
    return Config(progname="pxla-mlir update-checks", path=[], useValgrind=False, valgrindLeakCheck=False,
                  valgrindArgs=[], noExecute=False, debug=False, isWindows=False, order="lexical", params={}, **quiet)


def _fallback_suite(lit, lit_config, path: str):
    config = lit.TestingConfig.TestingConfig.fromdefaults(lit_config)
    config.name = "pxla-mlir update-checks"
    config.test_format = lit.formats.ShTest(execute_external=False)
    config.substitutions = pxla_substitutions(sys.executable)
    config.environment["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), config.environment["PATH"]])
    config.environment.update({k: v for k, v in os.environ.items() if k.startswith(("PXLA_", "XLA_", "JAX_"))})
    root = os.path.dirname(path)
    return lit.Test.TestSuite(config.name, root, root, config), (os.path.basename(path),)


def load_test(path: str):
    """The lit test object for ``path``, configured by its suite (or pxla_mlir's defaults)."""
    lit = _lit()
    lit_config = _lit_config()
    try:
        suite, in_suite = lit.discovery.getTestSuite(path, lit_config, {})
        if suite is None:
            suite, in_suite = _fallback_suite(lit, lit_config, os.path.abspath(path))
            config = suite.config
        else:
            config = lit.discovery.getLocalConfig(suite, in_suite[:-1], lit_config, {})
    except SystemExit:  # a lit.cfg.py that exits
        raise RunError("lit: the test suite's configuration failed to load") from None
    return lit, lit_config, lit.Test.Test(suite, in_suite, config)


def run_lines(path: str, tmp_base: str):
    """The test's RUN lines after substitution (``%t`` under ``tmp_base``), and the lit objects to run them."""
    lit, lit_config, test = load_test(path)
    parsed = lit.TestRunner.parseIntegratedTestScript(test)
    if isinstance(parsed, lit.Test.Result):
        message = parsed.output.strip().splitlines()[0] if parsed.output.strip() else parsed.code.name
        if "no 'RUN:' line" in message:
            raise RunError("no RUN line (add one, e.g. '// RUN: pxla-opt %s | filecheck %s')")
        raise RunError(f"lit would not run it: {message}")
    directives = [d for d in parsed if isinstance(d, lit.TestRunner.CommandDirective)]
    subs = lit.TestRunner.getDefaultSubstitutions(test, os.path.dirname(tmp_base), tmp_base)
    conditions = {feature: True for feature in test.config.available_features}
    try:
        commands = lit.TestRunner.applySubstitutions(parsed, subs, conditions,
                                                     recursion_limit=test.config.recursiveExpansionLimit)
    except ValueError as e:
        raise RunError(f"lit: {str(e).splitlines()[0]}") from None
    runs = []
    for directive, command in zip(directives, commands):
        m = _DBG.fullmatch(command)
        runs.append(RunLine(directive.start_line_number, (m.group(1) if m else command).strip()))
    return lit, lit_config, test, runs


def _with_capture(command: str) -> str:
    """``command`` with each FileCheck run as the capture; one expected to fail (``not FileCheck``) checks
    something else and runs as it is."""
    def wrap(m):
        return m.group(0) if _NOT.search(command[:m.start()]) else f'"{sys.executable}" "{_SHIM}" {m.group(0)}'

    return _FILECHECK_WORD.sub(wrap, command)


def summary(text: str, limit: int = 3) -> str:
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    more = f" / ... ({len(lines) - limit} more lines)" if len(lines) > limit else ""
    return " / ".join(lines[:limit]) + more if lines else "no output on stderr"


def capture(path: str) -> tuple[list[RunLine], list[Capture], list[str]]:
    """Runs the test's RUN lines in order, as lit would: their FileChecks' inputs, and the
    paths that depend on this run or this machine (the temporary directory, the test's own).

    Raises RunError at the first RUN line that fails, with its stderr.
    """
    with tempfile.TemporaryDirectory(prefix="pxla-update-checks-") as tmp:
        tmp_dir = os.path.join(tmp, "Output")
        os.makedirs(tmp_dir)
        lit, lit_config, test, runs = run_lines(path, os.path.join(tmp_dir, os.path.basename(path)))
        exec_dir = os.path.dirname(test.getExecPath())
        external = getattr(test.config.test_format, "execute_external", False)
        captures = []
        for k, run in enumerate(runs):
            directory = os.path.join(tmp, f"run{k}")
            os.makedirs(directory)
            test.config.environment["PXLA_CHECK_CAPTURE"] = directory
            command = _with_capture(run.command)
            execute = lit.TestRunner.executeScript if external else lit.TestRunner.executeScriptInternal
            kwargs = {} if external else {"debug": False}
            try:
                out, err, code, timeout, *_ = execute(test, lit_config, os.path.join(tmp_dir, "script"), [command],
                                                      exec_dir, **kwargs)
            except lit.TestRunner.ScriptFatal as e:
                raise RunError(f"lit cannot run this RUN line: {summary(str(e))}", run.line) from None
            if code != 0:
                why = f"timed out ({timeout})" if timeout else f"exit {code}"
                raise RunError(f"RUN line failed ({why}): {summary(err or out)}", run.line)
            for name in sorted(os.listdir(directory)):
                with open(os.path.join(directory, name)) as f:
                    record = json.load(f)
                captures.append(Capture(run, record["filecheck"], tuple(record["args"]), record["cwd"],
                                        record["input"]))
        source_dir = os.path.dirname(os.path.abspath(path))
        places = {os.path.realpath(tmp), tmp, source_dir, os.path.realpath(source_dir), exec_dir}
        return runs, captures, [p.rstrip(os.sep) + os.sep for p in places]


def filecheck_command(capture: Capture) -> list[str] | None:
    """The FileCheck the RUN line named, as an argv (None if it is not on PATH)."""
    path = capture.filecheck
    if os.sep not in path:
        path = shutil.which(path)
    return [path] if path and os.access(path, os.X_OK) else None
