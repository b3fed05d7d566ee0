"""The passes and pipelines jaxlib registers, by argument.

jaxlib has no API that lists its registered passes (mlir-opt prints its own
registry; the Python bindings cannot), so the list is generated from
jaxlib's binaries: every string in them that jaxlib's pipeline parser accepts
as a pass name is one. There is one list per jaxlib release, a data file in
``jaxlib_pass_lists/`` (``jaxlib-0.12.0.1.json``); the installed release's is
used, or else the newest older one. Add the list of a new jaxlib with::

    python -m pxla_mlir.mlir.pass_infra.jaxlib_passes --write

``tests/mlir/pass_infra/test_jaxlib_passes.py`` checks that the installed jaxlib's list
exists and is current, and that every entry runs through pxla-opt.
"""

from __future__ import annotations

import json
import os
import re
import sys

import jaxlib.version

__all__ = ["JAXLIB_VERSION", "INSTALLED_JAXLIB", "MODULE_PASSES", "FUNC_PASSES", "PIPELINES", "all_names",
           "is_jaxlib_name", "kind", "discover", "list_path"]

#: The folder of the generated lists, one data file per jaxlib release.
LISTS = os.path.join(os.path.dirname(__file__), "jaxlib_pass_lists")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def list_path(version: str) -> str:
    """The data file holding jaxlib ``version``'s list: ``jaxlib_pass_lists/jaxlib-0.12.0.1.json``."""
    return os.path.join(LISTS, f"jaxlib-{version}.json")


def _installed_list() -> dict:
    """The list of the installed jaxlib, or else of the newest older release listed (or the oldest)."""
    listed = sorted((_version(name), name) for name in os.listdir(LISTS) if name.endswith(".json"))
    installed = _version(jaxlib.version.__version__)
    older = [name for version, name in listed if version <= installed]
    with open(os.path.join(LISTS, (older or [listed[0][1]])[-1])) as f:
        return json.load(f)


_LIST = _installed_list()
#: The jaxlib release whose list this is (the installed one, when it is listed).
JAXLIB_VERSION: str = _LIST["jaxlib_version"]
#: The jaxlib installed here.
INSTALLED_JAXLIB: str = jaxlib.version.__version__
MODULE_PASSES: tuple[str, ...] = tuple(_LIST["module_passes"])
FUNC_PASSES: tuple[str, ...] = tuple(_LIST["func_passes"])
PIPELINES: tuple[str, ...] = tuple(_LIST["pipelines"])
_NAMES = frozenset((*MODULE_PASSES, *FUNC_PASSES, *PIPELINES))

# A null-terminated string that could be a pass argument (lower case, '-' or '.' between words).
_CANDIDATE = re.compile(rb"(?<=\x00)[a-z][a-z0-9]*(?:[-.][a-z0-9]+)*(?=\x00)")


def all_names() -> tuple[str, ...]:
    """Every jaxlib pass and pipeline argument, sorted."""
    return tuple(sorted(_NAMES))


def is_jaxlib_name(name: str) -> bool:
    return name in _NAMES


def _stderr_to_devnull():
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)
    return saved


def kind(name: str, ctx) -> str | None:
    """What jaxlib registers as ``name``: "module" (a pass on builtin.module or
    any op), "func" (a pass on func.func), "pipeline", or None."""
    from jaxlib.mlir import passmanager

    for anchored, what in ((f"builtin.module({name})", "module"), (f"builtin.module(func.func({name}))", "func")):
        try:
            printed = str(passmanager.PassManager.parse(anchored, context=ctx))
        except ValueError:
            continue
        # A pipeline prints as the passes it expands to, a pass as itself.
        inner = printed[len("builtin.module("):]
        return what if re.match(rf"(func\.func\()?{re.escape(name)}(\{{|\)|$)", inner) else "pipeline"
    return None


def discover() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(module passes, func.func passes, pipelines) registered in this process's jaxlib."""
    import mmap

    import jaxlib

    from pxla_mlir.mlir.core.context import make_context

    candidates: set[str] = set()
    for root, _, files in os.walk(os.path.dirname(jaxlib.__file__)):
        for name in files:
            if not name.endswith(".so"):
                continue
            with open(os.path.join(root, name), "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                candidates.update(s.decode() for s in _CANDIDATE.findall(m))
    ctx = make_context()
    found: dict[str, list[str]] = {"module": [], "func": [], "pipeline": []}
    saved = _stderr_to_devnull()  # LLVM prints a line for every name it refuses
    try:
        for name in sorted(candidates):
            what = kind(name, ctx)
            if what is not None:
                found[what].append(name)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    return tuple(found["module"]), tuple(found["func"]), tuple(found["pipeline"])


def generated() -> str:
    """The installed jaxlib's list as its data file holds it: module passes (on builtin.module or any op),
    func.func passes (nest them: func.func(NAME)) and named pipelines."""
    module, func, pipelines = discover()
    data = {"jaxlib_version": jaxlib.version.__version__, "module_passes": list(module), "func_passes": list(func),
            "pipelines": list(pipelines)}
    return json.dumps(data, indent=1) + "\n"


if __name__ == "__main__":
    text = generated()
    if sys.argv[1:] == ["--write"]:  # the installed jaxlib's list, in its place
        from pxla_mlir.mlir.support.files import write_atomically

        write_atomically(list_path(jaxlib.version.__version__), text)
    else:
        sys.stdout.write(text)
