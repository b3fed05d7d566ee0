// RUN: pxla-opt %s --load-pass-plugin=%S/Inputs/tag_functions.py -tag-functions='n=2' | filecheck %s
// RUN: pxla-opt %s --load-pass-plugin %S/Inputs/tag_functions.py -p 'builtin.module(tag-functions,canonicalize)' | filecheck %s --check-prefix DEFAULT

// CHECK-LABEL: func.func public @main
// CHECK-SAME: plugin.tag = 2 : i64
// CHECK: func.func private @helper
// CHECK-NOT: plugin.tag
// DEFAULT: func.func public @main
// DEFAULT-SAME: plugin.tag = 1 : i64
func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
  %0 = call @helper(%a) : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
func.func private @helper(%a: tensor<3xf32>) -> tensor<3xf32> {
  return %a : tensor<3xf32>
}
