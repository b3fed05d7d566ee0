"""What a user of the distribution meets first: its metadata, ``python -m
pxla_mlir``, the lit extra behind update-checks, the examples subcommand,
and the examples at the end of every command's --help."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import tomllib

import pytest
from conftest import REPO

from pxla_mlir.tools import cli

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_the_metadata_says_what_it_is_and_where_it_lives():
    assert PYPROJECT["description"].startswith("A compiler that lowers JAX parallel maps")
    assert PYPROJECT["authors"] == [{"name": "pxla_mlir developers"}]
    urls = PYPROJECT["urls"]
    assert set(urls) == {"Homepage", "Documentation", "Source", "Issues"}
    assert all(u.startswith("https://github.com/pxla-mlir/pxla-mlir") for u in urls.values())
    classifiers = PYPROJECT["classifiers"]
    for needed in ("Programming Language :: Python :: 3.11", "Programming Language :: Python :: 3.12",
                   "Programming Language :: Python :: 3.13", "Topic :: Software Development :: Compilers",
                   "Typing :: Typed"):
        assert needed in classifiers
    assert PYPROJECT["license"] == "Apache-2.0" and "Apache License" in (REPO / "LICENSE").read_text()


def test_the_numpy_floor_is_one_every_supported_jax_allows():
    """A floor below jax's own lets pip resolve a numpy that no supported jax installs with."""
    import importlib.metadata

    from packaging.requirements import Requirement

    def floor(requirements) -> tuple[int, ...]:
        (req,) = [Requirement(r) for r in requirements if Requirement(r).name == "numpy"]
        (spec,) = [s for s in req.specifier if s.operator == ">="]
        return tuple(int(p) for p in spec.version.split("."))

    ours = floor(PYPROJECT["dependencies"])
    jax = floor(r for r in importlib.metadata.requires("jax") or [] if "extra ==" not in r)
    # jax 0.10.2's, the oldest supported: every numpy we allow installs with some supported jax, and no numpy
    # a supported jax installs with is refused (jax 0.12 asks for more, numpy>=2.2)
    assert ours == (2, 0)
    assert ours <= jax, f"pyproject.toml: numpy>={ours} refuses what the installed jax allows (numpy>={jax})"


def test_version_names_jax_and_jaxlib(capsys):
    import importlib.metadata

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == (f"pxla-mlir 0.1.0 (jax {importlib.metadata.version('jax')}, "
                                       f"jaxlib {importlib.metadata.version('jaxlib')})\n")


def test_the_lit_extra_brings_what_update_checks_runs():
    names = {req.split(">")[0].split("=")[0].strip() for req in PYPROJECT["optional-dependencies"]["lit"]}
    assert names == {"lit", "filecheck"}


def test_update_checks_without_lit_names_the_extra(monkeypatch, capsys, tmp_path):
    from pxla_mlir.tools import lit_runs

    monkeypatch.setattr(lit_runs, "have_lit", lambda: False)
    test = tmp_path / "t.mlir"
    test.write_text("// RUN: pxla-opt %s | filecheck %s\n")
    assert cli.main(["update-checks", str(test)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs lit, which is not installed" in err
    assert "pip install 'pxla-mlir[lit]'" in err


@pytest.mark.subprocess
def test_python_dash_m_runs_the_command_line():
    proc = subprocess.run([sys.executable, "-m", "pxla_mlir", "passes"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "pxla-expand-shard" in proc.stdout and "pxla-pmap-pipeline" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "pxla_mlir", "nope"], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2 and proc.stderr.startswith("pxla-mlir: error: ") and "Traceback" not in proc.stderr


def _commands() -> dict:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return dict(sub.choices)


def test_every_command_has_help_examples():
    assert set(_commands()) == set(cli.HELP_EXAMPLES)


@pytest.mark.parametrize("name", sorted(cli.HELP_EXAMPLES))
def test_every_commands_help_ends_with_examples(name):
    text = _commands()[name].format_help()
    head, marker, tail = text.rpartition("\nexamples:\n")
    assert marker, f"pxla-mlir {name} --help has no examples: block"
    lines = tail.rstrip("\n").split("\n")
    assert lines == [f"  {line}" for line in cli.HELP_EXAMPLES[name]]
    assert any(line.startswith(f"  pxla-mlir {name}") for line in lines), lines


def test_the_top_level_help_ends_with_examples_too():
    assert cli.build_parser().format_help().endswith(cli.examples_epilog(cli.TOP_EXAMPLES) + "\n")


def _command_lines(line: str) -> list[list[str]]:
    """The words of each pxla-mlir command in an example line, as a shell splits it (pipes, subshells and
    redirections apart; variables set and comments off)."""
    import shlex

    lexer = shlex.shlex(line, posix=True, punctuation_chars="|;&()<>")
    lexer.whitespace_split = True
    commands, words = [], []
    for token in [*lexer, ";"]:
        if token and set(token) <= set("|;&()<>"):
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # VAR=value before the command
            if words and words[0] == "pxla-mlir":
                commands.append(words)
            words = []
        else:
            words.append(token)
    return commands


def test_the_help_examples_parse_and_name_no_checkout_files():
    """Each pxla-mlir command of an example is a command line the parser takes; the files they read come from
    'pxla-mlir example NAME' (a wheel has no examples/ folder). tests/tools/test_help_examples.py runs them."""
    for name, lines in [("", cli.TOP_EXAMPLES), *cli.HELP_EXAMPLES.items()]:
        for line in lines:
            assert not re.search(r"(?<![\w.])examples/", line), line
            for words in _command_lines(line):
                if words[1:] != ["emit", "--help"]:
                    assert cli.build_parser().parse_args(words[1:]).command == words[1], line
        assert not name or any(words[1] == name for line in lines for words in _command_lines(line)), name


def test_example_list_names_each_example_and_how_it_runs(capsys):
    assert cli.main(["example", "--list"]) == 0
    out = capsys.readouterr().out
    for name in ("pmap_demo", "train_step", "nested_reduction", "xmap_2d", "per_device_psum"):
        assert f"\n{name} " in "\n" + out
    assert "run: pxla-mlir run train_step.py:train_step" in out
    assert "run: python pmap_demo.py" in out and "run: pxla-mlir run per_device_psum.mlir" in out
    assert cli.main(["example"]) == 0 and capsys.readouterr().out == out  # no NAME: the list


def test_example_copies_one_out_and_says_how_to_run_it(capsys, tmp_path):
    assert cli.main(["example", "train_step", "-o", str(tmp_path / "mine")]) == 0
    copied = tmp_path / "mine" / "train_step.py"
    assert copied.read_text() == (REPO / "examples" / "train_step.py").read_text()
    assert capsys.readouterr().out == f"wrote {copied}\nrun it with: pxla-mlir run {copied}:train_step\n"
    assert cli.main(["example", "train_step", "-o", str(tmp_path / "mine")]) == 0  # the same file: fine
    copied.write_text("# edited\n")
    capsys.readouterr()
    assert cli.main(["example", "train_step", "-o", str(tmp_path / "mine")]) == 2
    assert "exists and differs from the example; give --force" in capsys.readouterr().err
    assert copied.read_text() == "# edited\n"
    assert cli.main(["example", "train_step", "-o", str(tmp_path / "mine"), "--force"]) == 0
    assert copied.read_text() == (REPO / "examples" / "train_step.py").read_text()


def test_example_path_and_mistakes(capsys):
    assert cli.main(["example", "per_device_psum", "--path"]) == 0
    path = capsys.readouterr().out.strip()
    assert path.endswith("per_device_psum.mlir") and pathlib.Path(path).read_text().startswith("// A per-device")
    assert cli.main(["example", "train_stp"]) == 2
    assert "no example named 'train_stp'; did you mean 'train_step'?" in capsys.readouterr().err
    assert cli.main(["example", "--run"]) == 2
    assert "--run needs the example's NAME" in capsys.readouterr().err
    assert cli.main(["example", "train_step", "--run", "--path"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.slow
def test_example_runs_a_map_on_its_example_inputs(capsys):
    assert cli.main(["example", "nested_reduction", "--run"]) == 0
    captured = capsys.readouterr()
    assert "$ pxla-mlir run " in captured.err and "nested_reduction.py:two_level_sum" in captured.err
    assert "output[0]" in captured.out


@pytest.mark.parametrize(("argv", "message"), [
    (["emitt", "x.py:f"], "invalid choice: 'emitt' (choose from 'passes', "),
    (["emit", "x.py:f", "--dump-d", "x"], "unrecognized arguments: --dump-d x (see pxla-mlir emit --help); "),
    (["show-sharding", "--shap=8"], "unrecognized arguments: --shap=8 (see pxla-mlir show-sharding --help); "),
])
def test_misspelled_commands_and_flags_get_a_suggestion(capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pxla-mlir: error: ") and message in err and err.count("\n") == 1
    assert err.rstrip().endswith(("did you mean 'emit'?", "did you mean '--dump-dir'?", "did you mean '--shape'?"))
