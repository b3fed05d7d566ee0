// Pipeline mistakes: one clear located error, exit 1, no traceback.

// RUN: not pxla-opt %s --pass-pipeline='builtin.module(pxla-verify-handoff,nope)' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// UNKNOWN: <pass-pipeline>:1:36: error: unknown pass or pipeline 'nope'
// UNKNOWN-NEXT: builtin.module(pxla-verify-handoff,nope)
// UNKNOWN-NEXT: {{^                                   \^$}}
// UNKNOWN-NOT: Traceback

// RUN: not pxla-opt %s --pass-pipeline='builtin.module(pxla-verify-handoff{num_replicas=2})' 2>&1 | filecheck %s --check-prefix=OPTION
// OPTION: error: pxla-verify-handoff: unknown option 'num_replicas' (did you mean 'num-replicas'?); valid options: num-partitions, num-replicas

// RUN: not pxla-opt %s --pass-pipeline='builtin.module(pxla-verify-handoff{num-replicas=two})' 2>&1 | filecheck %s --check-prefix=VALUE
// VALUE: error: pxla-verify-handoff: option 'num-replicas' expects an integer, got 'two'

// RUN: not pxla-opt %s --pass-pipeline='builtin.module(canonicalize{bogus=1})' 2>&1 | filecheck %s --check-prefix=JAXLIB-OPTION
// JAXLIB-OPTION: error: canonicalize: unknown option 'bogus'; valid options: {{.*}}max-iterations

// LLVM's reason for a bad option value is part of the one error (not a stray line before it).
// RUN: not pxla-opt %s --pass-pipeline='builtin.module(canonicalize{top-down=2})' 2>&1 | filecheck %s --check-prefix=JAXLIB-VALUE
// JAXLIB-VALUE-NOT: for the --top-down option
// JAXLIB-VALUE: <pass-pipeline>:1:16: error: canonicalize: option 'top-down': '2' is invalid value for boolean argument! Try 0 or 1
// JAXLIB-VALUE-NOT: for the --top-down option

// RUN: not pxla-opt %s --pass-pipeline='builtin.module(func.func(pxla-verify-handoff))' 2>&1 | filecheck %s --check-prefix=NESTED
// NESTED: error: 'pxla-verify-handoff' runs on builtin.module; it cannot be nested inside 'func.func(...)'

// RUN: not pxla-opt %s --pass-pipeline='pxla-verify-handoff' 2>&1 | filecheck %s --check-prefix=ANCHOR
// ANCHOR: error: the pipeline must be anchored on 'builtin.module(...)', e.g. 'builtin.module(pxla-verify-handoff)'

// RUN: not pxla-opt %s --pass-pipeline='builtin.module(cse' 2>&1 | filecheck %s --check-prefix=SYNTAX
// SYNTAX: <pass-pipeline>:1:19: error: expected ')', got end of pipeline

// RUN: not pxla-opt %s --pass-pipeline='builtin.module(pxla-verify-handoff{num-replicas=4294967296})' 2>&1 | filecheck %s --check-prefix=RANGE
// RUN: not pxla-opt %s --pass-pipeline='builtin.module(pxla-verify-handoff{num-partitions=-1})' 2>&1 | filecheck %s --check-prefix=RANGE
// RANGE: error: pxla-verify-handoff: option 'num-{{replicas|partitions}}' expects an integer from 0 to 1048576, got '{{4294967296|-1}}'

// Deep nesting is refused (MLIR's own parser would accept 20,000 levels).
// RUN: not %python -c "import sys; from pxla_mlir.mlir.cli.pxla_opt import main; sys.exit(main(['%s', '--pass-pipeline=builtin.module(' + 'func.func(' * 500 + 'cse' + ')' * 501]))" 2>&1 | filecheck %s --check-prefix=DEEP
// DEEP: <pass-pipeline>:1:646: error: the pipeline nests more than 64 levels of '(...)'
// DEEP-NEXT: {{^}}...func.func(func.func({{.*}}...{{$}}
// DEEP-NOT: Traceback

// RUN: not pxla-opt %s --no-such-flag 2>&1 | filecheck %s --check-prefix=FLAG
// FLAG: pxla-opt: error: unrecognized arguments: --no-such-flag (see pxla-opt --help)

module {
}
