"""The stages of a program (floor 8: below the map front end, above the
runtime): what pmap, xmap, ``pxla_mlir.jit`` and ``pxla_mlir.load`` hand
back, as jax's ``Lowered`` over its ``Lowering``.

* :mod:`.aot`: ``Layout``, ``lower()``, ``Lowered`` and ``Compiled``, jax's
  AOT API;
* :mod:`.text_module`: ``pxla_mlir.load``, a module from text as a ``Lowered``;
* :mod:`.devices`: the check of a ``devices=`` list.
"""
