// Bad input: one located error line each, exit 1, no traceback.

// RUN: not pxla-opt %t.does-not-exist.mlir 2>&1 | filecheck %s --check-prefix=MISSING
// MISSING: pxla-opt: error: could not open input file '{{.*}}does-not-exist.mlir': No such file or directory

// RUN: not pxla-opt %s 2>&1 | filecheck %s --check-prefix=PARSE
// PARSE: input_errors.mlir:21:14: error: operation being parsed with an unregistered dialect
// PARSE-NEXT: {{^}}    "foo.bar"() : () -> (){{$}}
// PARSE-NEXT: {{^}}             ^{{$}}
// PARSE-NOT: Traceback

// With --allow-unregistered-dialect the op parses, and the handoff verifier
// names it.
// RUN: not pxla-opt %s --allow-unregistered-dialect --pass-pipeline='builtin.module(pxla-verify-handoff)' 2>&1 | filecheck %s --check-prefix=UNREG
// UNREG: input_errors.mlir:21:5: error: 'foo.bar' is not builtin/func/mhlo

// RUN: pxla-opt %s --allow-unregistered-dialect | filecheck %s --check-prefix=ROUNDTRIP
// ROUNDTRIP: "foo.bar"
module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main() {
    "foo.bar"() : () -> ()
    return
  }
}

// jaxlib's chlo-legalize-to-hlo dies with SIGSEGV on an unregistered op; a
// guard before it reports the op instead.
// RUN: not pxla-opt %s --allow-unregistered-dialect --pass-pipeline='builtin.module(pxla-pmap-pipeline)' 2>&1 | filecheck %s --check-prefix=GUARD
// GUARD: input_errors.mlir:21:5: error: 'foo.bar' belongs to an unregistered dialect, and chlo-legalize-to-hlo (in this pipeline) crashes on such ops; remove the op or the pass
// GUARD-NOT: error

// Nesting deep enough to overflow the parser's stack is refused before
// parsing, at the place it gets too deep (1000 levels pass, 1001 do not).
// RUN: %python -c "print('module attributes {x.a = ' + '[' * 999 + ']' * 999 + '} {}')" > %t.deep_ok.mlir
// RUN: pxla-opt %t.deep_ok.mlir | filecheck %s --check-prefix=DEEP-OK
// DEEP-OK: module attributes {x.a = {{\[\[\[}}
// RUN: %python -c "print('module attributes {x.a = ' + '[' * 1000 + ']' * 1000 + '} {}')" > %t.deep_attr.mlir
// RUN: not pxla-opt %t.deep_attr.mlir 2>&1 | filecheck %s --check-prefix=DEEP-ATTR
// DEEP-ATTR: deep_attr.mlir:1:1025: error: input nested more than 1000 levels deep (brackets, regions or unary minus); jaxlib's MLIR parser would overflow its stack, so it is not parsed
// RUN: %python -c "print('module {' * 20000 + '}' * 20000)" > %t.deep_modules.mlir
// RUN: not pxla-opt %t.deep_modules.mlir 2>&1 | filecheck %s --check-prefix=DEEP-MODULES
// DEEP-MODULES: deep_modules.mlir:1:8008: error: input nested more than 1000 levels deep
// RUN: %python -c "print('\n'.join(['func.func @f(%%x: tensor<i1>) {'] + ['%%r = \"mhlo.if\"(%%x) ({'] * 600 + ['return', '}']))" > %t.deep_regions.mlir
// RUN: not pxla-opt %t.deep_regions.mlir 2>&1 | filecheck %s --check-prefix=DEEP-REGIONS
// DEEP-REGIONS: deep_regions.mlir:501:21: error: input nested more than 1000 levels deep
// RUN: %python -c "print('#m = affine_map<(d0) -> (' + '- ' * 8000 + 'd0)>\nmodule attributes {x.a = #m} {}')" > %t.deep_minus.mlir
// RUN: not pxla-opt %t.deep_minus.mlir 2>&1 | filecheck %s --check-prefix=DEEP-MINUS
// DEEP-MINUS: deep_minus.mlir:1:26: error: input nested more than 1000 levels deep
// RUN: not pxla-opt %t.deep_modules.mlir --split-input-file --verify-diagnostics 2>&1 | filecheck %s --check-prefix=DEEP-VERIFY
// DEEP-VERIFY: deep_modules.mlir:1:8008: error: unexpected error: input nested more than 1000 levels deep
