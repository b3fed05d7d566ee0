"""Example pass plugins, installed as ``pxla_mlir.examples.plugins``.

Each file is one plugin: load it into ``pxla-opt`` with
``--load-pass-plugin=PATH`` or ``--load-pass-plugin=pxla_mlir.examples.plugins.NAME``.

* :mod:`.collective_bytes`: ``collective-bytes``, a report of the bytes each
  collective moves, per device and per device group (remarks and JSON);
* :mod:`.unshard_as_all_gather`: ``unshard-as-all-gather``, the 2022 unshard
  (a piece written into zeros at the device's index, then summed over the
  devices) rewritten as one all_gather.

Both read collectives' device groups with ``pxla_mlir.passes.helpers``, the
public helpers for pass authors.
"""
