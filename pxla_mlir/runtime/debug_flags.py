"""jax's debugging flags for pxla_mlir's own lowerings and compiles.

* ``jax_log_compiles`` (``JAX_LOG_COMPILES``): each compile logs jax's two
  lines through jax's loggers, at WARNING (DEBUG without the flag): "Compiling
  <module> with global shapes and types ... Argument mapping: ..." and
  "Finished XLA compilation of <module> in ... sec" (also jax's
  backend-compile duration event for ``jax.monitoring`` listeners).
* ``jax_dump_ir_to`` (``JAX_DUMP_IR_TO``): the stages are written where jax
  writes its modules, named as jax names them with the map's module name:
  ``jax_ir0003_pmap_step_pxla.mlir`` (what import produced, the pipeline's
  input) at lowering and ``jax_ir0004_pmap_step_compile.mlir`` (the final
  MHLO handed to XLA) at compile, as jax.jit writes ``..._jit_f_compile.mlir``.
"""

from __future__ import annotations

import contextlib

from ..jax_internals import dump_ir, log_backend_compile, log_compiling

__all__ = ["compiling", "dump_stage"]


def module_name(module) -> str:
    """The module's symbol name (``pmap_step``), as jax names its own modules in logs and dumps."""
    op = module.operation
    return op.attributes["sym_name"].value if "sym_name" in op.attributes else "module"


def dump_stage(module, stage: str) -> None:
    """``module`` (an ir.Module or operation) into ``jax_dump_ir_to``, if set."""
    dump_ir(module, stage)


@contextlib.contextmanager
def compiling(module, avals, shardings):
    """Logs a compile of ``module`` as jax logs its own."""
    name = module_name(module)
    log_compiling(name, avals, shardings)
    with log_backend_compile(name):
        yield
