"""Floor 0 of the jax-free floor: the counters and timers every stage
reports to (:mod:`.stats`) and the bounded LRU every cache uses
(:mod:`.lru`). They import nothing of pxla_mlir's and never jax.
"""
