"""The explore page of the nested example (examples/nested_reduction.py): how
long it takes to build, how big it is, and how long headless Chromium takes
to open it.

    python bench/bench_explore.py [--runs 5] [--keep page.html]

"Ready" is the page's own measure (performance.now() when its scripts have
highlighted and linked every block, from navigation start), read back from
the DOM; the median of the runs is printed. Without Chromium the browser
part is skipped and says so.
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import argparse
import pathlib
import statistics
import tempfile
import time

from pxla_mlir.mlir.explore import build_page, render
from pxla_mlir.mlir.explore.browser import BrowserError, dump_dom, find_chromium, ready_ms
from pxla_mlir.tools.emit import MapOptions, lower_target

TARGET = str(pathlib.Path(__file__).resolve().parent.parent / "examples/nested_reduction.py") + ":two_level_sum"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", help="also write the page here")
    args = parser.parse_args()
    lowered = lower_target(TARGET, MapOptions())
    lowered.compile()  # XLA's compile is not the page's cost
    t = time.perf_counter()
    page = build_page(lowered)
    built = time.perf_counter() - t
    t = time.perf_counter()
    html = render(page)
    rendered = time.perf_counter() - t
    size = len(html.encode())
    print(f"explore page of {TARGET.rsplit('/', 1)[-1]}")
    print(f"  model (replay {len(page.passes)} passes, diffs, collectives)  {built * 1e3:8.1f} ms")
    print(f"  render                                          {rendered * 1e3:8.1f} ms")
    print(f"  size                                            {size / 1024:8.1f} KiB  (limit 1 MB)")
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(args.keep or os.path.join(tmp, "nested.html"))
        path.write_text(html, encoding="utf-8")
        if find_chromium() is None:
            print("  ready in Chromium                               skipped: no Chromium (apt-get install chromium)")
            return
        times = []
        try:
            for _ in range(args.runs):
                dom, _ = dump_dom(path)
                times.append(ready_ms(dom))
        except BrowserError as e:
            print(f"  ready in Chromium                               failed: {e}")
            return
        if None in times:
            print("  ready in Chromium                               failed: the page's script did not finish")
            return
        label = f"ready in Chromium (median of {len(times)})"
        print(f"  {label:<48}{statistics.median(times):8.1f} ms  "
              f"(min {min(times):.1f}, max {max(times):.1f}; limit 1000 ms)")


if __name__ == "__main__":
    main()
