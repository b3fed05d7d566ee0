"""Every Python snippet of the README runs as written, after the short
preamble in the HTML comment just above it (``<!-- preamble ... -->``) and
with the checks in the one just below it (``<!-- then ... -->``); the
multi-process snippet runs as a 2-process launch."""

import os
import re
import sys
import textwrap

import pytest
from conftest import REPO
from isolation import run_isolated

from pxla_mlir.distributed.launch import launch

README = (REPO / "README.md").read_text()
SNIPPET = re.compile(r"(?:<!-- preamble(?P<opts>[^\n]*)\n(?P<pre>.*?)-->\n)?```python\n(?P<code>.*?)```\n"
                     r"(?:<!-- then\n(?P<then>.*?)-->\n)?", re.S)


def snippets():
    found = []
    for m in SNIPPET.finditer(README):
        line = README.count("\n", 0, m.start("code"))
        opts = dict(o.split("=") for o in (m["opts"] or "").split())
        found.append((line, opts, (m["pre"] or "") + m["code"] + (m["then"] or "")))
    return found


def test_every_snippet_is_found():
    assert len(snippets()) == README.count("```python\n") >= 11


@pytest.mark.subprocess
@pytest.mark.slow
def test_single_process_snippets_run():
    cases = [(line, code) for line, opts, code in snippets() if "processes" not in opts]
    runner = textwrap.dedent("""
        import traceback
        failed = []
        for line, code in CASES:
            try:
                exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__readme__"})
            except BaseException:  # pytest.fail's Failed too
                failed.append(f"README.md line {line}:\\n" + traceback.format_exc(limit=3))
        print("RAN", len(CASES))
        print("\\n".join(failed) if failed else "ALL OK")
    """).replace("CASES", repr(cases))
    out = run_isolated(runner, timeout=400)
    assert f"RAN {len(cases)}" in out and out.rstrip().endswith("ALL OK"), out[-4000:]


@pytest.mark.multiprocess
@pytest.mark.subprocess
@pytest.mark.slow
def test_multi_process_snippet_runs_in_a_two_process_launch():
    (multi,) = [(line, opts, code) for line, opts, code in snippets() if "processes" in opts]
    line, opts, code = multi
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    finished = launch([sys.executable, "-c", code], int(opts["processes"]), timeout_s=180,
                      cpu_devices=int(opts["cpu_devices"]), env=env, cwd=str(REPO))
    for f in finished:
        assert f.returncode == 0, f"README.md line {line}, process {f.index}: {f.describe()}\n{f.output[-3000:]}"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
