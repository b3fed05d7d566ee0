"""pxla_mlir.distributed's lazy names: what its ``TYPE_CHECKING`` block shows
type checkers is what ``__getattr__`` loads, and ``__all__`` lists both."""

import ast
import inspect

import pxla_mlir.distributed as distributed


def _type_checking_imports() -> dict[str, str]:
    """name -> the submodule the TYPE_CHECKING block imports it from."""
    tree = ast.parse(inspect.getsource(distributed))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    return {a.name: node.module.rsplit(".", 1)[1] for node in block.body if isinstance(node, ast.ImportFrom)
            for a in node.names if node.module}


def test_type_checkers_see_every_lazy_name():
    assert _type_checking_imports() == distributed._LAZY


def test_all_lists_the_eager_and_the_lazy_names():
    assert sorted(distributed.__all__) == sorted(["launch", "Finished", *distributed._LAZY])
    assert len(set(distributed.__all__)) == len(distributed.__all__)
