"""Headless Chromium for the explore page: the DOM after the page's scripts
ran, a screenshot, a value computed in the laid-out page, and how long the
page took to be ready.

    python -m pxla_mlir.mlir.explore.browser screenshot page.html out.png
    python -m pxla_mlir.mlir.explore.browser timing page.html [--runs 5]

Used by the tests, ``make screenshot`` and the explore benchmark. Chromium
runs under a hard timeout, with a throw-away profile and no network use of
its own (no sync, updates or background traffic).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

__all__ = ["find_chromium", "dump_dom", "screenshot", "evaluate", "ready_ms", "BrowserError"]

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars")


class BrowserError(RuntimeError):
    """Chromium is missing, failed or timed out."""


def find_chromium() -> str | None:
    override = os.environ.get("PXLA_CHROMIUM")
    if override:
        return override if shutil.which(override) else None
    return next((path for path in map(shutil.which, NAMES) if path), None)


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    binary = find_chromium()
    if binary is None:
        raise BrowserError("no Chromium found (apt-get install chromium, or set PXLA_CHROMIUM)")
    with tempfile.TemporaryDirectory(prefix="pxla_chromium_") as profile:
        cmd = [binary, *FLAGS, f"--user-data-dir={profile}", *args]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise BrowserError(f"Chromium did not finish within {timeout:.0f} s: {' '.join(cmd)}") from None


def _url(path: str | os.PathLike) -> str:
    return pathlib.Path(path).resolve().as_uri()


def dump_dom(path: str | os.PathLike, timeout: float = 90) -> tuple[str, str]:
    """(the DOM after load, Chromium's stderr with console messages)."""
    result = _run(["--enable-logging=stderr", "--v=0", "--dump-dom", _url(path)], timeout)
    if result.returncode != 0 or "<html" not in result.stdout:
        raise BrowserError(f"chromium --dump-dom failed (exit {result.returncode}): {result.stderr[-2000:]}")
    return result.stdout, result.stderr


def screenshot(path: str | os.PathLike, png: str | os.PathLike, size: tuple[int, int] = (1400, 1000),
               timeout: float = 90) -> None:
    png = pathlib.Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    result = _run([f"--screenshot={png}", f"--window-size={size[0]},{size[1]}", _url(path)], timeout)
    if result.returncode != 0 or not png.is_file():
        raise BrowserError(f"chromium --screenshot failed (exit {result.returncode}): {result.stderr[-2000:]}")


_RESULT = "pxla-evaluate"
_PROBE = r"""addEventListener("load", function () {
  var out;
  try { out = {value: (function () { return (%s
); })()}; } catch (e) { out = {error: String(e && e.stack || e)}; }
  var slot = document.createElement("script");
  slot.type = "application/json";
  slot.id = "%s";
  slot.textContent = JSON.stringify(out).replace(/</g, "\\u003c");
  document.body.appendChild(slot);
});
"""


def evaluate(path: str | os.PathLike, expression: str, size: tuple[int, int] = (1400, 1000),
             timeout: float = 90):
    """The JSON value of a JavaScript expression, evaluated after the page
    loaded and was laid out in a window of ``size`` (width, height) pixels.

    Chromium opens a copy of the page with one script added at the end of
    its body (from a file beside the copy, so the expression needs no
    escaping); the page itself is left as it is."""
    text = pathlib.Path(path).read_text(encoding="utf-8")
    tag = '<script src="pxla_evaluate.js"></script>'
    at = text.rfind("</body>")
    text = text[:at] + tag + text[at:] if at >= 0 else text + tag
    with tempfile.TemporaryDirectory(prefix="pxla_evaluate_") as tmp:
        copy = pathlib.Path(tmp) / "page.html"
        copy.write_text(text, encoding="utf-8")
        (copy.parent / "pxla_evaluate.js").write_text(_PROBE % (expression, _RESULT), encoding="utf-8")
        result = _run(["--dump-dom", f"--window-size={size[0]},{size[1]}", _url(copy)], timeout)
    m = re.search(f'<script type="application/json" id="{_RESULT}">(.*?)</script>', result.stdout, re.S)
    if result.returncode != 0 or m is None:
        raise BrowserError(f"chromium --dump-dom gave no result (exit {result.returncode}): {result.stderr[-2000:]}")
    out = json.loads(m.group(1))
    if "error" in out:
        raise BrowserError(f"the expression failed in the page: {out['error']}")
    return out["value"]


def ready_ms(dom: str) -> float | None:
    """The page's own measure: ms from navigation start until its scripts finished."""
    m = re.search(r'data-ready-ms="([\d.]+)"', dom)
    return float(m.group(1)) if m else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pxla_mlir.mlir.explore.browser")
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("screenshot", help="save a PNG of the page")
    s.add_argument("page")
    s.add_argument("png")
    s.add_argument("--size", default="1400,1000")
    t = sub.add_parser("timing", help="ms until the page is ready (median of runs)")
    t.add_argument("page")
    t.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        if args.command == "screenshot":
            w, h = (int(v) for v in args.size.split(","))
            screenshot(args.page, args.png, (w, h))
            print(f"wrote {args.png}")
        else:
            times = []
            for _ in range(args.runs):
                dom, _ = dump_dom(args.page)
                if ready_ms(dom) is None:
                    raise BrowserError("the page never set data-ready-ms (did its script fail?)")
                times.append(ready_ms(dom))
            size = os.path.getsize(args.page)
            print(f"{args.page}: {size / 1024:.1f} KiB, ready in {statistics.median(times):.0f} ms "
                  f"(median of {len(times)}; min {min(times):.0f}, max {max(times):.0f})")
    except BrowserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
