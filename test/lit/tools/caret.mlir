// Diagnostics located in the input show its line and a caret under the
// column, as mlir-opt's do (tabs expand to 8 columns, like LLVM's).

// A pass error, and a parse error, each with its line.
// RUN: not pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-verify-handoff{num-replicas=4})' 2>&1 | filecheck %s --strict-whitespace
// CHECK: caret.mlir:10:1: error: 'mhlo.num_replicas' is 1 but 4 was expected
// CHECK-NEXT: {{^}}module @caret attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {{[{]$}}
// CHECK-NEXT: {{^}}^{{$}}
// CHECK-NEXT: caret.mlir:19:24: error: expected ':'
module @caret attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
}

// -----

// CHECK-NEXT: {{^}}    %0 = mhlo.negate %x tensor<2xf32>{{$}}
// CHECK-NEXT: {{^}}                       ^{{$}}
module @parse_error {
  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %0 = mhlo.negate %x tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}

// A tab before the column: the caret still stands under the '('.
// RUN: printf 'module {\n\t"foo.bar"() : () -> ()\n}\n' > %t.tab.mlir
// RUN: not pxla-opt %t.tab.mlir 2>&1 | filecheck %s --check-prefix=TAB --strict-whitespace
// TAB: tab.mlir:2:11: error: operation being parsed with an unregistered dialect
// TAB-NEXT: {{^}}        "foo.bar"() : () -> (){{$}}
// TAB-NEXT: {{^}}                 ^{{$}}

// --verify-diagnostics reports its mismatches the same way.
// RUN: printf 'module {\n  // expected-error @+1 {{never}}\n  func.func @f() {\n    return\n  }\n}\n' > %t.verify.mlir
// RUN: not pxla-opt %t.verify.mlir --verify-diagnostics 2>&1 | filecheck %s --check-prefix=VERIFY --strict-whitespace
// VERIFY: verify.mlir:2:6: error: expected error "never" on line 3 was not produced
// VERIFY-NEXT: {{^}}  // expected-error @+1 {{[{][{]}}never{{[}][}]}}{{$}}
// VERIFY-NEXT: {{^}}     ^{{$}}

// A very long line shows a window around the column.
// RUN: %python -c "print('module attributes {x.a = ' + '[' * 1000 + ']' * 1000 + '} {}')" > %t.long.mlir
// RUN: not pxla-opt %t.long.mlir 2>&1 | filecheck %s --check-prefix=LONG --strict-whitespace
// LONG: long.mlir:1:1025: error: input nested more than 1000 levels deep
// LONG-NEXT: {{^}}...{{\[+}}]{{\]+}}...{{$}}
// LONG-NEXT: {{^ +\^$}}
