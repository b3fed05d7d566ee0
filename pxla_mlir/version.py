"""pxla_mlir's version, in a module of its own: every floor may read it without importing the package's API;
and :func:`source_digest`, which tells one build of the package from another."""

from __future__ import annotations

import functools
import os

__version__ = "0.1.0"

__all__ = ["__version__", "source_digest"]


@functools.cache
def source_digest() -> tuple[str, str]:
    """(a digest of the package's code, how it was read): a changed pass or importer is another lowering,
    whatever the version says. An installed wheel is told by its dist-info's RECORD, which lists every file
    with its hash (one file read); a checkout or an editable install by the size and time of every source
    file (a walk over the tree, which changes as one works)."""
    import hashlib  # here: importing the package stays cheap

    here = os.path.dirname(os.path.abspath(__file__))
    record = _installed_record(os.path.dirname(here))
    if record is not None:
        return hashlib.sha256(__version__.encode() + b"\0" + record).hexdigest(), "RECORD"
    return _walked(here), "files"


def _installed_record(site: str) -> bytes | None:
    """The RECORD of a (non-editable) installation of pxla-mlir beside the package, or None."""
    import glob
    import json

    for info in sorted(glob.glob(os.path.join(site, "pxla_mlir-*.dist-info"))):
        if not os.path.basename(info).startswith(f"pxla_mlir-{__version__}."):
            continue
        try:
            with open(os.path.join(info, "direct_url.json"), encoding="utf-8") as f:
                if json.load(f).get("dir_info", {}).get("editable"):
                    return None  # an editable install: the files are the checkout's
        except (OSError, ValueError):
            pass
        try:
            with open(os.path.join(info, "RECORD"), "rb") as f:
                return f.read()
        except OSError:
            return None
    return None


def _walked(here: str) -> str:
    import hashlib
    import importlib.util

    passes = importlib.util.find_spec("pxla_mlir.passes")  # the top-level passes/ folder in a checkout
    roots = {here} | ({os.path.dirname(passes.origin)} if passes and passes.origin else set())
    h = hashlib.sha256(__version__.encode())
    for root in sorted(roots):
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            where = folder[len(root):]
            for name in sorted(files):
                if name.endswith(".py"):
                    st = os.stat(os.path.join(folder, name))
                    h.update(f"{where}/{name}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()
