"""Checks that run right before jaxlib passes known to kill the process on
some inputs, turning the crash into a located error.

Found by fuzzing pxla-opt (tests/fuzzing/opt_fuzz.py) on jaxlib 0.10.2:

* ``chlo-legalize-to-hlo`` dies with SIGSEGV on an op of an unregistered
  dialect (only parseable with ``--allow-unregistered-dialect``).
"""

from __future__ import annotations

import dataclasses
import re

from pxla_mlir.mlir.core import ir_utils
from pxla_mlir.mlir.pass_infra.base import ModulePass, PassError

__all__ = ["guards_for"]


@dataclasses.dataclass(frozen=True)
class _NoUnregisteredOps(ModulePass):
    argument = "pxla-guard-unregistered-ops"
    summary = "Refuse ops of unregistered dialects before a jaxlib pass that crashes on them"
    checks_only = True

    before: str = ""

    def run(self, module):
        if not module.context.allow_unregistered_dialects:
            return  # the parser has already refused such ops
        for op in ir_utils.walk(module):
            if not module.context.is_registered_operation(op.name):
                raise PassError(op, f"'{op.name}' belongs to an unregistered dialect, and {self.before} "
                                    f"(in this pipeline) crashes on such ops; remove the op or the pass")


#: jaxlib pass argument -> the guard that must run before it.
_HAZARDS = {"chlo-legalize-to-hlo": _NoUnregisteredOps}


def guards_for(step_text: str) -> list[ModulePass]:
    """Guards to run before a step of jaxlib passes (canonical pipeline text)."""
    names = set(re.findall(r"[\w.\-]+", step_text))
    return [guard(before=name) for name, guard in _HAZARDS.items() if name in names]
