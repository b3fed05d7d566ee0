"""The stages of a program (floor 8: below the map front end, above the
runtime): what pmap, xmap, ``pxla_mlir.jit`` and ``pxla_mlir.load`` hand
back, as jax's ``Lowered`` over its ``Lowering``.

* :mod:`.lowering`: the :class:`~.lowering.Lowering` protocol (what a
  program lowered to, and the work of compiling it) and the
  :class:`~.lowering.Layout` of its flat inputs and outputs;
* :mod:`.map_lowering`: a traced map's lowering, made from the frozen
  value of what decides it by running its pass pipeline, or taken from the
  lowering cache (:func:`~.map_lowering.lower_cached`);
* :mod:`.lowering_cache`: lowerings kept by what decides them, in memory and
  beside the executables;
* :mod:`.text_module`: ``pxla_mlir.load``, a module from text and its lowering;
* :mod:`.final_module`: the work every lowering does on its final module
  (text and IR in each dialect, compiling it);
* :mod:`.aot`: ``Lowered`` and ``Compiled``, jax's AOT API over a lowering;
* :mod:`.signature`: how a call's arguments flatten and its outputs
  unflatten, and jax's errors for arguments other than compiled for;
* :mod:`.devices`: the check of a ``devices=`` list.
"""
