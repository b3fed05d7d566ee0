"""Reproducer trailers: mlir-opt's combined ``{-# dialect_resources ..., external_resources ... #-}`` block is
read (the resources stay with the module), and a module printed with resources is saved with one such block."""

import pathlib

import pytest

from pxla_mlir.mlir.cli import pxla_opt
from pxla_mlir.mlir.pass_infra import PipelineFailure, reproducer, run_pipeline

WITH_RESOURCE = """module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func @main() -> tensor<2xf32> {
    %0 = mhlo.constant dense_resource<blob1> : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
"""
RESOURCES = """  dialect_resources: {
    builtin: {
      blob1: "0x040000000000803F00000040"
    }
  }"""
#: As mlir-opt's --mlir-pass-pipeline-crash-reproducer writes one: a single block holding both.
MLIR_OPT_REPRODUCER = WITH_RESOURCE + """
{-#
""" + RESOURCES + """,
  external_resources: {
    mlir_reproducer: {
      pipeline: "builtin.module(pxla-verify-handoff{num-replicas=2})",
      disable_threading: true,
      verify_each: false
    }
  }
#-}
"""


def _opt(capsys, *argv) -> tuple[int, str, str]:
    rc = pxla_opt.main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_mlir_opts_combined_block_is_read_and_its_resources_stay():
    module, recorded = reproducer.split(MLIR_OPT_REPRODUCER.encode())
    assert recorded == reproducer.Recorded("builtin.module(pxla-verify-handoff{num-replicas=2})",
                                           verify_each=False, disable_threading=True)
    assert module.decode() == WITH_RESOURCE + "\n{-#\n" + RESOURCES + "\n#-}\n"


def test_run_reproducer_replays_mlir_opts_block(tmp_path, capsys):
    saved = tmp_path / "crash.mlir"
    saved.write_text(MLIR_OPT_REPRODUCER)
    rc, out, err = _opt(capsys, "--run-reproducer", saved)
    assert rc == 1 and not out
    assert err.splitlines()[0] == f"{saved}:1:1: error: 'mhlo.num_replicas' is 1 but 2 was expected"


def test_a_module_with_resources_is_saved_with_one_block_that_replays(parse, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PXLA_REPRO_DIR", str(tmp_path))
    with pytest.raises(PipelineFailure) as e:
        module = parse(f"{WITH_RESOURCE}{{-#\n{RESOURCES}\n#-}}\n")
        run_pipeline(module, "builtin.module(pxla-verify-handoff{num-replicas=2})")
    assert e.value.reproducer is not None
    text = pathlib.Path(e.value.reproducer).read_text(encoding="utf-8")
    assert text.count("{-#") == 1 and "dialect_resources" in text and "external_resources" in text
    rc, out, err = _opt(capsys, "--run-reproducer", e.value.reproducer)
    [diag] = e.value.diagnostics
    assert rc == 1 and err.splitlines()[0].endswith(f" error: {diag.message}")


def test_every_saved_reproducer_names_its_pipeline(tmp_path, monkeypatch):
    monkeypatch.setenv("PXLA_REPRO_DIR", str(tmp_path))
    with pytest.raises(TypeError):
        reproducer.save("module {}\n")  # type: ignore[call-arg]  # no reproducer without its pipeline
    path = reproducer.save("module {}", reproducer.Recorded("builtin.module(cse)"))
    assert path is not None
    assert reproducer.split(pathlib.Path(path).read_bytes()) == (b"module {}\n\n",
                                                                  reproducer.Recorded("builtin.module(cse)"))
