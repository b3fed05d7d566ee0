"""pxla-opt as a user meets it: in-process error paths, hostile inputs in a
subprocess (no crash, no traceback), and a jax-free start-up."""

import os
import subprocess
import sys

import jaxlib.version
import pytest

from pxla_mlir.mlir.cli import pxla_opt

VALID = """module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %0 = mhlo.negate %x : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
"""


def run_cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "pxla_mlir.mlir.cli.pxla_opt", *map(str, args)],
                          input=stdin, capture_output=True, timeout=300)


def assert_clean_failure(proc, *fragments, status=1):
    """A failure with an error message and ``status``: 1 for an error in the input, 2 for a command-line mistake."""
    err = proc.stderr.decode()
    assert proc.returncode == status, (proc.returncode, err)
    assert "Traceback" not in err
    assert "error: " in err
    for f in fragments:
        assert f in err, err


def test_in_process_usage_errors(capsys, tmp_path):
    assert pxla_opt.main([str(tmp_path / "nope.mlir")]) == 2
    assert "could not open input file" in capsys.readouterr().err
    assert pxla_opt.main(["--pass-pipeline=builtin.module(x{)"]) == 2
    assert "unbalanced '{'" in capsys.readouterr().err
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    assert pxla_opt.main([str(src), "-o", str(tmp_path / "no-dir" / "out.mlir")]) == 2
    assert "could not write output file" in capsys.readouterr().err


@pytest.mark.subprocess
def test_single_dash_flags_like_mlir_opt(tmp_path):
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    proc = run_cli(src, "-split-input-file", "-pass-pipeline=builtin.module(pxla-verify-handoff)")
    assert proc.returncode == 0 and b"mhlo.negate" in proc.stdout


@pytest.mark.subprocess
def test_stdin_and_stdout():
    proc = run_cli("-", stdin=VALID.encode())
    assert proc.returncode == 0 and proc.stdout.decode().startswith("module attributes")


@pytest.mark.subprocess
def test_empty_file_is_an_empty_module(tmp_path):
    src = tmp_path / "empty.mlir"
    src.write_bytes(b"")
    proc = run_cli(src)
    assert proc.returncode == 0 and proc.stdout.decode() == "module {\n}\n"


@pytest.mark.parametrize("data, fragment", [
    (bytes(range(256)) * 64, "error: "),
    (b"\x00\x01\x02 binary \xff\xfe", "error: "),
    (VALID.encode()[:120], "error: "),  # truncated MLIR
    (b'"foo.bar"() : () -> ()\n', "unregistered dialect"),
    (b"func.func @f() { mhlo.nonsense }\n", "mhlo.nonsense"),
    (VALID.replace("tensor<2xf32>\n", "tensor<3xf32>\n", 1).encode(), "error: "),  # type mismatch
])
@pytest.mark.subprocess
def test_hostile_input_fails_cleanly(tmp_path, data, fragment):
    src = tmp_path / "bad.mlir"
    src.write_bytes(data)
    for pipeline in ("builtin.module()", "builtin.module(pxla-handoff-pipeline)"):
        proc = run_cli(src, f"--pass-pipeline={pipeline}")
        assert_clean_failure(proc, fragment)
        assert f"{src}:" in proc.stderr.decode()  # located at a line of the file


@pytest.mark.subprocess
@pytest.mark.slow
def test_twenty_megabytes_of_constants(tmp_path):
    vals = ", ".join(f"{i}.5" for i in range(24))
    n = 20_000_000 // 180
    body = "\n".join(f"    %c{i} = mhlo.constant dense<[{vals}]> : tensor<24xf32>" for i in range(n))
    text = ("module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
            "  func.func public @main() -> tensor<24xf32> {\n" + body +
            f"\n    return %c{n - 1} : tensor<24xf32>\n  }}\n}}\n")
    src = tmp_path / "big.mlir"
    src.write_text(text)
    assert src.stat().st_size > 20_000_000
    proc = run_cli(src, "--pass-pipeline=builtin.module(pxla-verify-handoff,canonicalize)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(b"mhlo.constant") == 1  # canonicalize removed the unused ones
    # Truncated in the middle: a parse error, not a crash.
    src.write_text(text[: len(text) // 2])
    assert_clean_failure(run_cli(src), "big.mlir:")


def test_the_nesting_check_of_a_large_input_is_exact():
    """Over the quick count, a whole-buffer bound decides; only a bound over
    the limit is scanned token by token for the place."""
    from pxla_mlir.mlir.core.nesting_depth import MAX_NESTING, NestingError, check_nesting

    flat = b"[" * 600 + b"]" * 600
    check_nesting(flat * 3)
    # Strings, comments and the '>' of '->' do not count, with and without a comment in the input.
    skipped = b'"' + b"(" * 1500 + b'" ' + b"->" * 2000 + b"(" * 900
    check_nesting(skipped)
    check_nesting(skipped + b"\n// " + b"{" * 1500 + b"\n")
    with pytest.raises(NestingError) as e:
        check_nesting(flat + b'"((" ' + b"(" * (MAX_NESTING + 1))
    assert (e.value.line, e.value.col) == (1, len(flat) + 5 + MAX_NESTING + 1)
    with pytest.raises(NestingError):
        check_nesting(flat + b"(" * 10 + b"- " * MAX_NESTING)  # a minus run on top of the depth


@pytest.mark.subprocess
def test_verify_each_spellings(tmp_path):
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    for flag in ("-verify-each", "--verify-each=true", "--verify-each=0"):
        proc = run_cli(src, flag, "--pass-pipeline=builtin.module(pxla-verify-handoff,canonicalize)")
        assert proc.returncode == 0 and b"mhlo.negate" in proc.stdout, flag
    assert_clean_failure(run_cli(src, "--verify-each=maybe"), "--verify-each: expected true or false", status=2)


@pytest.mark.subprocess
def test_driver_does_not_import_jax(tmp_path):
    src = tmp_path / "ok.mlir"
    src.write_text(VALID)
    code = ("import sys; from pxla_mlir.mlir.cli import pxla_opt; "
            f"rc = pxla_opt.main([{str(src)!r}, '--pass-pipeline=builtin.module(pxla-handoff-pipeline)']); "
            "print('JAX' if 'jax' in sys.modules else 'NOJAX', rc)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip().endswith("NOJAX 0"), proc.stdout + proc.stderr


@pytest.mark.subprocess
def test_console_script_is_installed():
    exe = os.path.join(os.path.dirname(sys.executable), "pxla-opt")
    proc = subprocess.run([exe, "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and f"jaxlib {jaxlib.version.__version__}" in proc.stdout


def test_list_passes_names_the_installed_jaxlib_and_the_list_it_used(capsys, monkeypatch):
    from pxla_mlir.mlir.pass_infra import jaxlib_passes

    installed = jaxlib.version.__version__
    monkeypatch.setattr(jaxlib_passes, "JAXLIB_VERSION", installed)
    assert pxla_opt.main(["--list-passes"]) == 0
    assert f"jaxlib's passes (jaxlib {installed}, installed; " in capsys.readouterr().out
    monkeypatch.setattr(jaxlib_passes, "JAXLIB_VERSION", "0.10.1")  # a release without a list of its own
    assert pxla_opt.main(["--list-passes"]) == 0
    assert (f"jaxlib's passes (jaxlib {installed} is installed; listed from the generated list of jaxlib 0.10.1, "
            f"the nearest release listed; ") in capsys.readouterr().out


def test_source_excerpt_points_at_byte_columns():
    from pxla_mlir.mlir.core.diagnostics import EXCERPT_WIDTH, source_excerpt

    assert source_excerpt(b"a\n  bc\n", 2, 3) == ["  bc", "  ^"]
    assert source_excerpt("x = \u00e9t\u00e9 + y\r\n", 1, 13) == ["x = \u00e9t\u00e9 + y", "          ^"]  # y, after 2-byte chars
    assert source_excerpt(b"a\n", 3, 1) == [] and source_excerpt(b"a\n", 0, 1) == []
    line = "x" * 1000 + "!" + "y" * 1000
    text, caret = source_excerpt(line, 1, 1001)
    assert len(text) <= EXCERPT_WIDTH + 6 and text.startswith("...") and text.endswith("...")
    assert text[caret.index("^")] == "!"
