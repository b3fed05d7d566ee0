"""Floor 4: the reducer behind ``pxla-mlir reduce``, without jax.

From a module on which a test succeeds ("the module is interesting": the
test's exit status is 0, as llvm-reduce, creduce and cvise read it) to the
smallest module on which it still succeeds. Every candidate is a module that
parses and verifies, printed by MLIR (:mod:`.candidate`); reductions shrink a
module by units, any subset of which can be applied together
(:mod:`.reductions`, :mod:`.signatures`, :mod:`.simplify`, in the order of
:mod:`.catalog`); the delta loop
(:mod:`.delta`) tries chunks of units, halving them as llvm-reduce does, and
asks an evaluator (:mod:`.evaluate`) which candidates are interesting, each
text once, several at a time. Tests are shell commands (:mod:`.evaluate`) or
checks that run in worker processes (:mod:`.workers`, :mod:`.worker`), such
as a pipeline's diagnostics (:mod:`.pipeline_check`); the reduced module can
become a lit test (:mod:`.lit_test`). The checks that need jax (XLA's compile,
results compared) live in ``pxla_mlir.tools.reduce_checks``.
"""
