"""Running a final module: compile it through jaxlib (:mod:`.compile`), place
arguments on the devices (:mod:`..jaxbridge.placement`), launch it (:mod:`.executable`),
bound un-completed launches (:mod:`.inflight`), check donations
(:mod:`.donation`), and dispatch repeated calls from C++ (:mod:`.dispatch`).
"""
