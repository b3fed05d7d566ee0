"""The IR helpers that stand between a pass and a process-killing binding misuse."""

import pytest
from isolation import run_isolated

pytestmark = pytest.mark.subprocess


def test_replace_op_refuses_its_own_results_and_replaces_by_others():
    """Erasing an op whose result is still used kills the process: replacing an op by its own
    results must raise instead (isolated, so a regression fails one test)."""
    out = run_isolated("""
        from jaxlib.mlir import ir
        from pxla_mlir.mlir.core import ir_utils
        from pxla_mlir.mlir.core.context import make_context

        with make_context():
            m = ir.Module.parse('''
              func.func @f() -> (tensor<ui32>, tensor<ui32>) {
                %0 = mhlo.partition_id : tensor<ui32>
                %1 = mhlo.replica_id : tensor<ui32>
                return %0, %0 : tensor<ui32>, tensor<ui32>
              }''')
            pid, rid = [op.operation for op in m.body.operations[0].regions[0].blocks[0].operations][:2]
            try:
                ir_utils.replace_op(pid, [pid.result])
            except RuntimeError as e:
                print("refused:", e)
            ir_utils.replace_op(pid, [rid.result])
            m.operation.verify()
            print(str(m).count("partition_id"), str(m).count("return %0, %0"))
    """, timeout=120)
    assert "refused: cannot replace mhlo.partition_id by its own results" in out
    assert out.strip().endswith("0 1")  # partition_id gone, both returns now the replica_id
