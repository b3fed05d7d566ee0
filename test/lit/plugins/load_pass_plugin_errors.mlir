// RUN: pxla-opt %s --load-pass-plugin=%S/Inputs/tag_functions.py --split-input-file --verify-diagnostics -tag-functions
// RUN: not pxla-opt %s --load-pass-plugin=%S/Inputs/tag_functions.py -tag-functions='n=-1' 2>&1 | filecheck %s --check-prefix NEGATIVE
// RUN: not pxla-opt %s --load-pass-plugin=%S/Inputs/missing.py -tag-functions 2>&1 | filecheck %s --check-prefix MISSING

// NEGATIVE: load_pass_plugin_errors.mlir:9:1: error: n=-1: a tag is a non-negative integer
// MISSING: pxla-opt: error: pass plugin '{{.*}}missing.py' does not exist

// expected-error @+1 {{already tagged: run tag-functions once}}
func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> attributes {plugin.tag = 1 : i64} {
  return %a : tensor<3xf32>
}
