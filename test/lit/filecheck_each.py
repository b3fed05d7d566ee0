"""One FileCheck command under several FileChecks: ``lit -DFILECHECK=filecheck:/usr/lib/llvm-19/bin/FileCheck``
checks every CHECK line under the PyPI filecheck and under LLVM's (stricter) while running each RUN line once.

    python filecheck_each.py CHECKER[:CHECKER...] -- FILECHECK-ARGUMENTS...

Standard input is read once and given to each checker, whose output is passed on. When every checker passes,
the status is 0; when every one fails, the first one's status. When they disagree, it says which failed and
ends by SIGABRT: lit's ``not`` fails a command that crashes, so a disagreement fails the test whether or not
the RUN line expects the checks to fail.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[1] != "--":
        sys.exit("usage: filecheck_each.py CHECKER[:CHECKER...] -- FILECHECK-ARGUMENTS...")
    checkers, args = argv[0].split(os.pathsep), argv[2:]
    data = sys.stdin.buffer.read()
    runs = [subprocess.run([checker, *args], input=data, capture_output=True) for checker in checkers]
    for run in runs:
        sys.stdout.buffer.write(run.stdout)
        sys.stderr.buffer.write(run.stderr)
    sys.stdout.flush()
    failed = [checker for checker, run in zip(checkers, runs) if run.returncode != 0]
    if failed and len(failed) < len(checkers):
        passed = [checker for checker in checkers if checker not in failed]
        print(f"filecheck_each.py: the checkers disagree: {', '.join(failed)} failed, {', '.join(passed)} passed",
              file=sys.stderr, flush=True)
        signal.signal(signal.SIGABRT, signal.SIG_DFL)
        os.abort()
    return runs[0].returncode if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
