"""No module of the package (pxla_mlir/ and the top-level passes/) is over
:data:`MAX_LINES` lines: a module that grows past it holds more than one
concern, and is split by concern, not trimmed."""

import import_graph
from conftest import REPO

MAX_LINES = 450

#: Modules being split in parallel work, allowed over the ceiling until that work lands. Temporary: empty it
#: once they are under it, and never add to it.
PENDING_SPLITS = frozenset({
    "pxla_mlir/maps/stages.py",
    "pxla_mlir/pmaps/partitions.py",
    "pxla_mlir/mlir/ir/pxla_attrs.py",
    "passes/place_pieces.py",
})


def _sizes() -> dict[str, int]:
    return {path.relative_to(REPO).as_posix(): len(path.read_text().splitlines())
            for path in import_graph.modules().values()}


def test_no_module_is_over_the_ceiling():
    over = {path: lines for path, lines in _sizes().items() if lines > MAX_LINES and path not in PENDING_SPLITS}
    assert not over, (f"modules over {MAX_LINES} lines (split each by concern into modules whose names say what "
                      f"they hold): {over}")


def test_pending_splits_are_still_pending():
    """The temporary allowance names only modules that exist and still need it: one brought under the ceiling
    (or moved) leaves the set."""
    sizes = _sizes()
    done = sorted(path for path in PENDING_SPLITS if sizes.get(path, 0) <= MAX_LINES)
    assert not done, f"take these off PENDING_SPLITS in {__file__}: {done}"
