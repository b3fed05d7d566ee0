"""What the map kinds (pmap, xmap) share: the map front end, floor 9
(below each kind's package, above the stages in :mod:`pxla_mlir.stages`).

* :mod:`.tracing` and :mod:`.invariance`: tracing a body with named axes
  bound, and which named axes each value may vary over;
* :mod:`.kind` and :mod:`.registry`: what a kind tells the rest of
  pxla_mlir, and every kind by name;
* :mod:`.function`: the callable every front end returns (caches, lock, C++
  dispatch, ``lower``);
* :mod:`.arguments`: argument checks every front end makes;
* :mod:`.rules`: jvp, linearize, transpose, batching, partial eval and
  checkpoint rules written once over a kind's :class:`~.rules.MapRules`
  (pmap: one axis and int/None specs, xmap: named axes and ``{dim: name}``);
* :mod:`.pxla_form`: jax's lowering of a traced body to the pxla form;
* :mod:`.impl`: the compiled programs of maps bound with concrete arguments.
"""
