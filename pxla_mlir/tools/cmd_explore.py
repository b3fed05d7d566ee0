"""pxla-mlir explore: a whole lowering as one self-contained HTML page.

    pxla-mlir explore examples/nested_reduction.py:two_level_sum -o nested.html
    pxla-mlir explore ... --compare '?unshard=all-reduce'          # the same target, other options
    pxla-mlir explore ... --compare 'other.py:f?mode=partition'    # an emit spec, as for diff

The page shows the jaxpr, the pxla form, the module after every pass (diffed
against the previous stage, timed), the final MHLO, XLA's HLO, every
collective on the device grid and the shardings (see pxla_mlir.mlir.explore).
"""

from __future__ import annotations

import sys
import urllib.parse

from pxla_mlir.mlir.support.files import write_atomically
from pxla_mlir.mlir.support.suggest import did_you_mean
from pxla_mlir.tools.cmd_emit import check_choices
from pxla_mlir.tools.emit import MapOptions, prepare
from pxla_mlir.tools.errors import CliError
from pxla_mlir.tools.map_args import MAP_FLAGS, add_map_arguments, map_options
from pxla_mlir.tools.progress import status


def add_parser(sub) -> None:
    p = sub.add_parser("explore", help="write one HTML page with every stage of a pmap/xmap's lowering")
    add_map_arguments(p)
    p.add_argument("-o", dest="output", help="the HTML file (default: FUNCTION.html; '-': stdout)")
    p.add_argument("--compare", metavar="SPEC",
                   help="a second lowering side by side: an emit spec TARGET?key=value&... (as for diff), "
                        "or ?key=value&... for this target with other options")
    p.add_argument("--no-compile", action="store_true", help="leave out XLA's HLO and cost analysis")
    p.set_defaults(func=run)


def compare_options(spec: str, target: str, base: MapOptions) -> tuple[str, MapOptions]:
    """The target and options of a --compare spec; ``?k=v`` starts from ``base``."""
    other, _, query = spec.partition("?")
    if other and (":" not in other or other.endswith(".mlir")):
        raise CliError(f"--compare needs an emit spec TARGET?key=value&... or ?key=value&..., got {spec!r}")
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as e:
        raise CliError(f"bad --compare {spec!r}: {e}") from None
    options: dict = {}
    for key, value in pairs:
        options.setdefault(key.replace("-", "_"), []).append(value)
    known = set(MAP_FLAGS) | {"arg"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise CliError(f"unknown option {unknown[0]!r} in --compare {spec!r}; known: {', '.join(sorted(known))}"
                       f"{did_you_mean(unknown[0], known)}")
    check_choices(options, f"--compare {spec!r}")
    if not other and not options:
        raise CliError(f"--compare {spec!r} names no target and no option to change")
    start = base if not other else MapOptions()
    changes = {k: v[-1] for k, v in options.items() if k != "arg"}
    if "arg" in options:
        changes["args"] = tuple(options["arg"])
    return other or target, start.replace(**changes)


def _lower(target: str, opts: MapOptions):
    with status(f"loading {target}"):
        prepared = prepare(target, opts)
    with prepared.context(), status(f"lowering {target}"):
        return prepared.fn.lower(*[a.struct() for a in prepared.args])


def _page(lowered, target: str, compile: bool):
    from pxla_mlir.mlir.explore import build_page

    doing = "replaying the passes and compiling" if compile else "replaying the passes of"
    with status(f"{doing} {target} for the page"):
        return build_page(lowered, compile=compile)


def _label(target: str, opts: MapOptions) -> str:
    given = [(k.replace("_", "-"), getattr(opts, k)) for k in MAP_FLAGS if getattr(opts, k) is not None]
    given += [("arg", a) for a in opts.args]
    return target + ("?" + urllib.parse.urlencode(given, safe="[],:'{}") if given else "")


def run(args) -> int:
    from pxla_mlir.mlir.explore import compare_pages, render, render_comparison

    opts = map_options(args)
    lowered = _lower(args.target, opts)
    other = compare_options(args.compare, args.target, opts) if args.compare else None
    page = _page(lowered, args.target, not args.no_compile)
    if other is None:
        html = render(page)
    else:
        other_page = _page(_lower(*other), other[0], not args.no_compile)
        html = render_comparison(compare_pages(page, other_page, _label(args.target, opts), _label(*other)))
    output = args.output or args.target.rsplit(":", 1)[-1] + ".html"
    if output == "-":
        sys.stdout.write(html)
        return 0
    try:
        write_atomically(output, html)
    except OSError as e:
        raise CliError(f"cannot write {output!r}: {e.strerror}") from None
    print(f"wrote {output} ({len(html.encode()) / 1024:.1f} KiB)", file=sys.stderr)
    return 0
