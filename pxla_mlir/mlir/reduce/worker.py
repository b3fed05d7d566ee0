"""A worker process of the reducer: runs one built-in check on candidate files
until its input ends (``python -m pxla_mlir.mlir.reduce.worker``).

The protocol is JSON, one object per line. The first line in names the check
and its options, and the plugins to load::

    {"check": "pxla_mlir.mlir.reduce.pipeline_check:PipelineCheck", "options": {...}, "plugins": [...]}

and the worker answers ``{"ready": true}`` or ``{"error": "..."}``. Then each
line in is ``{"path": FILE}`` and each line out the check's report on that
file: ``{"failures": [messages], "note": "...", "diagnostics": [...]}``.

A check is a class built from the options whose ``report(text)`` returns that
report. The worker keeps the protocol on a descriptor of its own and sends
anything else written to stdout (by XLA, by a plugin) to stderr; Ctrl-C is the
parent's to handle (it kills the workers it started).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
from typing import Any, TextIO

__all__ = ["main"]


def _load(spec: dict[str, Any]) -> Any:
    from pxla_mlir.mlir.pass_infra import plugins

    for plugin in spec.get("plugins", ()):
        plugins.load_plugin(plugin)
    module, _, name = str(spec["check"]).partition(":")
    return getattr(importlib.import_module(module), name)(**spec.get("options", {}))


def _send(out: TextIO, message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # prints of checks and plugins cannot break the protocol
    sys.stdout = sys.stderr
    line = sys.stdin.readline()
    if not line:
        return 0
    try:
        check = _load(json.loads(line))
    except Exception as e:  # a plugin or option the parent checked already: say so, once
        _send(out, {"error": f"{type(e).__name__}: {e}" if not str(e).startswith("pass plugin") else str(e)})
        return 1
    _send(out, {"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        with open(request["path"], encoding="utf-8") as f:
            text = f.read()
        try:
            report = check.report(text)
        except Exception as e:  # a bug of a check: the candidate is not interesting, and the parent says why
            report = {"failures": [], "note": f"the check raised {type(e).__name__}: {e}"}
        _send(out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
