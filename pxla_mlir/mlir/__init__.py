"""The jax-free floor (floors 0-4): everything that reads, rewrites and
prints MLIR without jax. From the bottom: :mod:`.support` and
:mod:`.collectives` (floor 0), :mod:`.sharding` (1), :mod:`.core` (2),
:mod:`.pass_infra`, :mod:`.pipelines` and the passes (3), then
:mod:`.explore`, :mod:`.xla_handoff` and the jax-free commands in
:mod:`.cli` (4). Modules here import only this floor, ``pxla_mlir.errors``
and ``pxla_mlir.passes`` (and jaxlib's MLIR bindings), never jax: ``pxla-opt``
and ``pxla-mlir passes`` run on this floor alone.
"""
