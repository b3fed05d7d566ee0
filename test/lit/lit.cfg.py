# lit configuration for pxla_mlir: FileCheck tests of passes, pipelines,
# pxla-opt behaviour and emitted MHLO.
#
# Note: PyPI filecheck accepts --enable-var-scope but ignores it, so tests
# re-capture variables after each CHECK-LABEL instead of relying on scoping.

import contextlib
import os
import shutil
import sys

import lit.formats

config.name = "pxla_mlir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py", ".test"]
config.excludes = ["lit.cfg.py", "filecheck_each.py", "Inputs", "__pycache__"]
config.test_source_root = os.path.dirname(__file__)

repo_root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
python = sys.executable

# Tools come from the environment that runs lit (the project venv).
config.environment["PATH"] = os.pathsep.join([os.path.dirname(python), config.environment.get("PATH", "")])
config.environment["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
config.environment["JAX_PLATFORMS"] = "cpu"
for name in ("HOME", "TMPDIR"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
for name, value in os.environ.items():
    if name.startswith("PXLA_"):
        config.environment[name] = value

# %python, pxla-opt and pxla-mlir run this checkout's tools with this
# interpreter (the same substitutions serve pxla-mlir update-checks).
from pxla_mlir.tools.lit_runs import pxla_substitutions  # noqa: E402

config.substitutions += pxla_substitutions(python)

# %{golden:NAME}: examples/goldens/NAME.mlir, or its override for the installed jax release where jax's own
# lowering changed (examples/goldens/jax-0.12/NAME.mlir), as the pytest plugin's pxla_golden fixture reads them.
from pxla_mlir.pytest_plugin import Golden  # noqa: E402

_goldens = Golden(os.path.join(repo_root, "examples", "goldens"), update=False)
for _name in sorted(os.listdir(_goldens.directory)):
    if _name.endswith(".mlir"):
        config.substitutions.append((f"%{{golden:{_name[:-5]}}}", str(_goldens.path(_name))))

# FILECHECK (lit -DFILECHECK=... or the environment) picks the FileCheck that
# runs the checks, e.g. LLVM's (stricter than the PyPI clone, the default).
# Several, separated by os.pathsep (make test: filecheck:/usr/lib/llvm-19/bin/FileCheck),
# check each RUN line's output under every one (filecheck_each.py), running the line once.
filecheck = lit_config.params.get("FILECHECK") or os.environ.get("FILECHECK")
if filecheck:
    checkers = []
    for checker in filecheck.split(os.pathsep):
        found = checker if os.sep in checker else shutil.which(checker, path=config.environment["PATH"])
        if not found or not os.access(found, os.X_OK):
            lit_config.fatal(f"FILECHECK={filecheck}: {checker} is not an executable")
        checkers.append(found)
    if len(checkers) == 1:
        command = f'"{checkers[0]}"'
    else:
        each = os.path.join(config.test_source_root, "filecheck_each.py")
        command = f'"{python}" "{each}" "{os.pathsep.join(checkers)}" --'
    config.substitutions.append((r"(?<![\w./-])filecheck(?=\s|$)", command))

with contextlib.suppress(Exception):  # platforms without psutil support
    lit_config.maxIndividualTestTime = 300
