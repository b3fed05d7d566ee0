"""No module of the package (pxla_mlir/ and the top-level passes/) is over
:data:`MAX_LINES` lines: a module that grows past it holds more than one
concern, and is split by concern, not trimmed."""

import import_graph
from conftest import REPO

MAX_LINES = 450


def _sizes() -> dict[str, int]:
    return {path.relative_to(REPO).as_posix(): len(path.read_text().splitlines())
            for path in import_graph.modules().values()}


def test_no_module_is_over_the_ceiling():
    over = {path: lines for path, lines in _sizes().items() if lines > MAX_LINES}
    assert not over, (f"modules over {MAX_LINES} lines (split each by concern into modules whose names say what "
                      f"they hold): {over}")

