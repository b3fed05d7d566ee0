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
import logging

from pxla_mlir.jaxbridge.jax_internals import compiler, config, dispatch, jax_mlir, pxla

__all__ = ["compiling", "dump_stage"]


def compile_log_level() -> int:
    """The level jax logs compiles at: WARNING with ``jax_log_compiles``, else DEBUG."""
    return logging.WARNING if config.log_compiles.value else logging.DEBUG


def log_compiling(module_name: str, avals, shardings) -> None:
    """jax's "Compiling ..." line, through jax's own logger (as jax.jit logs it)."""
    level = compile_log_level()
    if pxla.logger.isEnabledFor(level):
        pxla.logger.log(level, "Compiling %s with global shapes and types %s. Argument mapping: %s.", module_name,
                        tuple(avals), tuple(shardings))


def log_backend_compile(module_name: str):
    """Times the XLA compile as jax does: "Finished XLA compilation of ... in ... sec"
    (jax's logger) and jax's backend-compile duration event (jax.monitoring)."""
    return dispatch.log_elapsed_time("Finished XLA compilation of {fun_name} in {elapsed_time:.9f} sec",
                                     fun_name=module_name, event=dispatch.BACKEND_COMPILE_EVENT)


def dump_ir(module, stage: str) -> str | None:
    """Writes ``module`` where ``jax_dump_ir_to`` says (``JAX_DUMP_IR_TO``), named as jax
    names its dumps (``jax_ir0007_<module>_<stage>.mlir``, jax's counter); the file name, or None."""
    name = jax_mlir.dump_module_to_file(module, stage)
    if name:
        compiler.logger.info("Dumped the module to %s.", name)
    return name


def dumping() -> bool:
    """Is ``jax_dump_ir_to`` set (do stages get dumped)?"""
    return bool(config.jax_dump_ir_to.value)


def dump_stage(module, stage: str) -> None:
    """``module`` (an ir.Module or operation) into ``jax_dump_ir_to``, if set."""
    dump_ir(module, stage)


@contextlib.contextmanager
def compiling(name: str, avals, shardings):
    """Logs a compile of the module named ``name`` as jax logs its own."""
    log_compiling(name, avals, shardings)
    with log_backend_compile(name):
        yield
