// RUN: not pxla-opt %s --load-pass-plugin=%S/Inputs/failing_passes.py -test-raises 2>&1 | filecheck %s --check-prefix RAISES
// RUN: not pxla-opt %s --load-pass-plugin=%S/Inputs/failing_passes.py -test-breaks-ir 2>&1 | filecheck %s --check-prefix BREAKS
// RUN: not pxla-opt %s --load-pass-plugin=%S/Inputs/failing_passes.py -test-deletes-main 2>&1 | filecheck %s --check-prefix DELETES

// A plugin's pass that fails names itself and its plugin, located in the input; never a traceback.
// RAISES: load_pass_plugin_failures.mlir:12:1: error: internal error in test-raises (plugin {{.*}}failing_passes.py): ZeroDivisionError: division by zero
// RAISES-NOT: Traceback
// BREAKS: error: empty block: expect at least a terminator
// BREAKS: load_pass_plugin_failures.mlir:12:1: error: test-breaks-ir (plugin {{.*}}failing_passes.py) left invalid IR (the verifier's errors say where): fix the pass
// DELETES: load_pass_plugin_failures.mlir:12:1: error: test-deletes-main (plugin {{.*}}failing_passes.py) removed the public function @main, which callers of the module call

func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
  return %a : tensor<3xf32>
}
