"""What the map primitives (``pxla_pmap``, ``pxla_xmap``) share.

* :mod:`.rules`: jvp, linearize, transpose, batching, partial eval and
  checkpoint rules written once over a :class:`~.rules.MapKind` (how a map
  names its mapped dimensions and axes; pmap: one axis and int/None specs,
  xmap: named axes and ``{dim: name}`` specs);
* :mod:`.impl`: the compiled programs of maps bound with concrete arguments.
"""
