"""pxla-mlir gen-checks / update-checks: FileCheck lines written from a module, kept in tests.

    pxla-mlir gen-checks out.mlir [--check-prefix P]     CHECK lines for a module (or '-')
    pxla-mlir update-checks TEST.mlir DIR ... [--check]  rewrite each test's generated blocks from its RUN lines

jax-free (lit, and the standard library): neither command imports jax.
"""

from __future__ import annotations

import os
import re
import sys

from pxla_mlir.tools.errors import ERROR_EXIT, CliError, write_output
from pxla_mlir.tools.progress import status

_PREFIX = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def add_parsers(sub) -> None:
    g = sub.add_parser("gen-checks", help="FileCheck lines (CHECK-LABEL/SAME/NEXT) that check a printed module")
    g.add_argument("input", nargs="?", default="-", help="a printed module (.mlir), or '-' for stdin (default)")
    g.add_argument("--check-prefix", default="CHECK", metavar="P", help="FileCheck prefix (default CHECK)")
    g.add_argument("--comment", default="//", help="comment leader of the check lines (default //)")
    g.add_argument("--max-constant", type=int, default=64, metavar="N",
                   help="constants longer than N characters are checked as dense<{{.*}}> (default 64; -1: never)")
    g.add_argument("-o", "--output", default="-", help="output file (default stdout)")
    g.set_defaults(func=run_gen)
    u = sub.add_parser("update-checks",
                       help="rewrite the generated CHECK blocks of lit tests from what their RUN lines print",
                       epilog="exit 0: the tests are up to date (or were updated); 1: --check found stale tests; "
                              "2: a mistake (a RUN line that fails, a test that cannot be read or updated, bad "
                              "arguments), whatever else was found")
    u.add_argument("tests", nargs="+", metavar="TEST",
                   help="a lit test, or a directory (its tests that have a generated block)")
    u.add_argument("--check", action="store_true",
                   help="write nothing; list the tests whose generated checks are stale (exit 1 if any)")
    u.set_defaults(func=run_update)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise CliError(f"cannot open {path!r}: {e.strerror}") from None


def run_gen(args) -> int:
    from pxla_mlir.mlir.cli.gen_checks import check_lines

    if not _PREFIX.match(args.check_prefix):
        raise CliError(f"--check-prefix must be letters, digits, '-' or '_' starting with a letter, "
                       f"got {args.check_prefix!r}")
    text = _read(args.input)
    lines = check_lines(text, args.check_prefix, comment=args.comment,
                        max_constant=None if args.max_constant < 0 else args.max_constant)
    if not lines:
        raise CliError(f"{'stdin' if args.input == '-' else args.input} is empty: no checks to generate")
    out = "\n".join(lines) + "\n"
    write_output(args.output, out)
    return 0


def _tests(paths: list[str]) -> list[str]:
    from pxla_mlir.tools.update_checks import tests_with_blocks

    tests = []
    for path in paths:
        if os.path.isdir(path):
            found = tests_with_blocks(path)
            if not found:
                raise CliError(f"no test under {path}/ has a generated block (// CHECK-GEN-BEGIN); "
                               "name a test to give it one")
            tests += found
        elif os.path.isfile(path):
            tests.append(path)
        else:
            raise CliError(f"cannot open {path!r}: no such file or directory")
    return tests


def run_update(args) -> int:
    """Exit 1 only for stale tests (--check), so that CI tells them from broken ones (2)."""
    from pxla_mlir.tools.lit_runs import INSTALL_HINT, have_lit
    from pxla_mlir.tools.update_checks import UpdateError, update, write

    if not have_lit():  # once, not once per test
        raise CliError(f"update-checks runs lit tests' RUN lines and needs lit, which is not installed: {INSTALL_HINT}")
    failed = stale = 0
    tests = _tests(args.tests)
    for i, test in enumerate(tests, 1):
        try:
            with status(f"update-checks: running the RUN lines of {test} ({i} of {len(tests)})"):
                result = update(test, verify=not args.check)
            if result.stale and not args.check:
                write(result)
        except UpdateError as e:
            where = f"{test}:{e.line}" if e.line else test
            print(f"pxla-mlir: error: {where}: {e}", file=sys.stderr)
            failed += 1
            continue
        if not result.stale:
            continue
        if args.check:
            print(f"{test}: generated checks are stale (run: pxla-mlir update-checks {test})")
            stale += 1
        else:
            print(f"updated {test}")
    return ERROR_EXIT if failed else 1 if stale else 0
