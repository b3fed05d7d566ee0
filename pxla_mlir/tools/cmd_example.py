"""pxla-mlir example: the examples installed with the package, listed, copied out or run.

    pxla-mlir example --list                   # names, what each shows, and how it runs
    pxla-mlir example train_step               # copy train_step.py into the current directory
    pxla-mlir example train_step --run         # run the installed copy: pxla-mlir run .../train_step.py:train_step
    pxla-mlir example collective_bytes         # copy a pass plugin, to load into pxla-opt (or to start your own)

The examples are the repository's ``examples/`` folder, shipped in the wheel as
``pxla_mlir.examples`` (its ``EXAMPLES`` table names them). Reading the table
imports no jax; ``--run`` starts it as ``pxla-mlir run`` or ``python FILE`` would.
The pass plugins (``plugins/``) run inside ``pxla-opt`` on a module, so they
are listed and copied with the ``pxla-opt`` line that loads them, and have
no ``--run``.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import filecmp
import importlib
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

from pxla_mlir.tools.errors import CliError


def add_parser(sub) -> None:
    e = sub.add_parser("example", help="list the installed examples, copy one out, or run it",
                       description="The examples installed with pxla_mlir: list them, copy one into a directory "
                                   "(the current one by default) to read and edit, or run it where it is installed.")
    e.add_argument("name", nargs="?", help="the example (pxla-mlir example --list names them)")
    e.add_argument("--list", action="store_true", help="list the examples (the default without NAME)")
    what = e.add_mutually_exclusive_group()
    what.add_argument("--run", action="store_true",
                      help="run the installed example: a map on its declared example inputs, as pxla-mlir run does, "
                           "or a script as python FILE")
    what.add_argument("--path", action="store_true", help="print where the example is installed, and copy nothing")
    e.add_argument("-o", "--output-dir", default=".", metavar="DIR",
                   help="where to copy the example (default: the current directory; made if missing)")
    e.add_argument("--force", action="store_true", help="overwrite a file of the same name that differs")
    e.set_defaults(func=run)


@dataclasses.dataclass(frozen=True)
class Example:
    name: str
    path: pathlib.Path
    function: str | None  # run with its declared example inputs; None: the file runs as it is

    @property
    def summary(self) -> str:
        """The first sentence of the file's docstring (a module: of its leading comment)."""
        text = self.path.read_text(encoding="utf-8")
        if self.path.suffix == ".py":
            doc = ast.get_docstring(ast.parse(text)) or ""
        else:
            lead = []
            for line in text.splitlines():
                if not line.startswith("//"):
                    break
                lead.append(line.lstrip("/ "))
            doc = " ".join(lead)
        first = " ".join(doc.split("\n\n")[0].split())
        sentence, dot, _ = first.partition(". ")
        return sentence + ("." if dot else "")

    @property
    def plugin(self) -> bool:
        """A pass plugin (plugins/NAME.py, whose pass argument is NAME in kebab case)."""
        return self.path.parent.name == "plugins"

    def run_command(self, path: pathlib.Path | str | None = None) -> str:
        """The command that runs the example at ``path`` (default: where it is installed)."""
        where = str(self.path if path is None else path)
        if self.plugin:
            return (f"pxla-opt IN.mlir --load-pass-plugin={where} "
                    f"-p 'builtin.module({self.name.replace('_', '-')})'")
        if self.function is not None:
            return f"pxla-mlir run {where}:{self.function}"
        return f"pxla-mlir run {where}" if self.path.suffix == ".mlir" else f"python {where}"


def examples() -> dict[str, Example]:
    """The installed examples, by name."""
    try:  # by name: the package is the repository's examples/ folder, mapped in (pyproject's package-dir)
        package = importlib.import_module("pxla_mlir.examples")
    except ImportError:
        package = None
    if package is None or package.__file__ is None:
        raise CliError("the examples are not installed with this pxla_mlir (no pxla_mlir.examples); reinstall it, "
                       "e.g. pip install --force-reinstall pxla-mlir")
    folder = pathlib.Path(package.__file__).parent
    return {name: Example(name, folder / file, function) for name, (file, function) in package.EXAMPLES.items()}


def _find(name: str) -> Example:
    found = examples()
    if name in found:
        return found[name]
    from difflib import get_close_matches

    close = get_close_matches(name, list(found), n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    raise CliError(f"no example named '{name}'; {hint}the examples: {', '.join(found)} (pxla-mlir example --list)")


def _list() -> int:
    found = examples()
    width = max(map(len, found))
    indent = " " * (width + 2)
    for example in found.values():
        print(textwrap.fill(example.summary, width=100, initial_indent=f"{example.name:<{width}}  ",
                            subsequent_indent=indent))
        print(f"{indent}run: {example.run_command(example.path.name)}")
    return 0


def _copy(example: Example, directory: str, force: bool) -> pathlib.Path:
    folder = pathlib.Path(directory)
    target = folder / example.path.name
    try:
        _check_target(example, folder, target)
        if target.exists() and not force and not filecmp.cmp(target, example.path, shallow=False):
            raise CliError(f"{target} exists and differs from the example; give --force to overwrite it, or -o DIR "
                           f"to copy the example elsewhere")
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(example.path, target)
    except OSError as e:
        raise CliError(f"cannot copy the example to {target}: {_reason(e)}; give a writable directory with -o DIR") \
            from None
    return target


def _check_target(example: Example, folder: pathlib.Path, target: pathlib.Path) -> None:
    """-o names a directory other than the installed examples' own, and no directory has the example's name."""
    if folder.exists() and not folder.is_dir():
        itself = " (the installed example itself)" if os.path.samefile(folder, example.path) else ""
        raise CliError(f"-o {folder} is a file{itself}, not a directory; give the directory to copy the example "
                       f"into (made if missing)")
    if target.exists() and os.path.samefile(target, example.path):
        raise CliError(f"-o {folder} is where the example is installed: {target} is the example itself; give "
                       f"another directory with -o DIR (pxla-mlir example {example.name} --path prints where it is)")
    if target.is_dir():
        raise CliError(f"cannot copy the example to {target}: it is a directory; give another directory with -o DIR")


def _reason(error: OSError) -> str:
    """What the system said (shutil's own errors have no strerror, only their message)."""
    return error.strerror or str(error) or type(error).__name__


def _run(example: Example, args) -> int:
    if example.plugin:
        raise CliError(f"{example.name} is a pass plugin: it runs inside pxla-opt on a module, not on its own; "
                       f"run {example.run_command()}")
    print(f"$ {example.run_command()}", file=sys.stderr)
    if example.function is None and example.path.suffix == ".py":
        # A script sets up its devices before jax starts: its own process, as `python FILE` runs it.
        return subprocess.run([sys.executable, str(example.path)], env=os.environ.copy()).returncode
    from pxla_mlir.tools import cmd_run

    target = str(example.path) + ("" if example.function is None else f":{example.function}")
    parser = argparse.ArgumentParser(prog="pxla-mlir")
    cmd_run.add_parser(parser.add_subparsers(dest="command"))
    run_args = parser.parse_args(["run", target])
    run_args.argv = ["run", target]  # what run --processes would start copies of
    return run_args.func(run_args)


def run(args) -> int:
    if args.name is None:
        if args.run or args.path:
            raise CliError(f"--{'run' if args.run else 'path'} needs the example's NAME (pxla-mlir example --list "
                           f"names them)")
        return _list()
    if args.list:
        raise CliError("--list lists every example: give it without NAME")
    example = _find(args.name)
    if args.path:
        print(example.path)
        return 0
    if args.run:
        return _run(example, args)
    copied = _copy(example, args.output_dir, args.force)
    print(f"wrote {copied}")
    print(f"run it with: {example.run_command(copied)}")
    return 0
