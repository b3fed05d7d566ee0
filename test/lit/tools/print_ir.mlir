// IR printing and timing go to stderr; the module still goes to stdout.

// RUN: pxla-opt %S/../Inputs/partition_mode.mlir --mlir-print-ir-after-all --pass-pipeline='builtin.module(pxla-convert-to-replica-mode,cse)' 2>&1 >/dev/null | filecheck %s --check-prefix=AFTER
// AFTER: IR Dump After {{.*}}pxla-convert-to-replica-mode
// AFTER: mhlo.replica_id
// AFTER: IR Dump After {{.*}}CSE
// AFTER-NOT: IR Dump Before

// RUN: pxla-opt %S/../Inputs/partition_mode.mlir --mlir-print-ir-before-all --mlir-print-ir-module-scope --pass-pipeline='builtin.module(cse)' 2>&1 >/dev/null | filecheck %s --check-prefix=BEFORE
// BEFORE: IR Dump Before {{.*}}CSE
// BEFORE-NEXT: module @spmd

// After-change skips passes that changed nothing (the second cse).
// RUN: pxla-opt %S/../Inputs/partition_mode.mlir --mlir-print-ir-after-change --pass-pipeline='builtin.module(cse,cse)' 2>&1 >/dev/null | filecheck %s --check-prefix=CHANGE
// CHANGE-COUNT-1: IR Dump After
// CHANGE-NOT: IR Dump After

// RUN: not pxla-opt %S/../Inputs/partition_mode.mlir --mlir-print-ir-after-failure --pass-pipeline='builtin.module(cse,pxla-verify-handoff{num-replicas=4})' 2>&1 >/dev/null | filecheck %s --check-prefix=FAILURE
// FAILURE: IR Dump After {{.*}}Failed: pxla-verify-handoff
// FAILURE: error: 'mhlo.num_replicas' is 1 but 4 was expected

// RUN: pxla-opt %S/../Inputs/partition_mode.mlir --mlir-timing --pass-pipeline='builtin.module(pxla-convert-to-replica-mode,canonicalize)' 2>&1 >/dev/null | filecheck %s --check-prefix=TIMING
// TIMING: Execution time report
// TIMING: ConvertToReplicaModePass
// TIMING: Canonicalizer
// TIMING: Total

// RUN: pxla-opt %S/../Inputs/partition_mode.mlir --mlir-pass-statistics --pass-pipeline='builtin.module(cse)' 2>&1 >/dev/null | filecheck %s --check-prefix=STATS
// STATS: Pass statistics report

// --mlir-print-ir-after=PASS and --mlir-print-ir-before=PASS (comma-separated,
// repeatable) keep the dumps of the named passes only.
// RUN: pxla-opt %S/../Inputs/partition_mode.mlir --mlir-print-ir-after=cse --pass-pipeline='builtin.module(pxla-convert-to-replica-mode,cse,canonicalize)' 2>&1 >/dev/null | filecheck %s --check-prefix=AFTER-CSE
// AFTER-CSE-NOT: {{IR Dump .*(ReplicaMode|Canonicalizer)}}
// AFTER-CSE: IR Dump After CSEPass: cse
// AFTER-CSE-NEXT: module @spmd
// AFTER-CSE-NOT: IR Dump
// RUN: pxla-opt %S/../Inputs/partition_mode.mlir --mlir-print-ir-before=pxla-convert-to-replica-mode,canonicalize --mlir-print-ir-after=canonicalize --pass-pipeline='builtin.module(pxla-convert-to-replica-mode,cse,canonicalize)' 2>&1 >/dev/null | filecheck %s --check-prefix=NAMED
// NAMED: IR Dump Before ConvertToReplicaModePass: pxla-convert-to-replica-mode
// NAMED-NOT: IR Dump {{.*}}: cse
// NAMED: IR Dump Before CanonicalizerPass: canonicalize
// NAMED: IR Dump After CanonicalizerPass: canonicalize
// NAMED-NOT: IR Dump
// RUN: not pxla-opt %S/../Inputs/partition_mode.mlir --mlir-print-ir-after=csee 2>&1 | filecheck %s --check-prefix=UNKNOWN
// UNKNOWN: pxla-opt: error: --mlir-print-ir-after: unknown pass 'csee' (pxla-opt --list-passes lists them)
// RUN: not pxla-opt %S/../Inputs/partition_mode.mlir --mlir-print-ir-before=pxla-handoff-pipeline 2>&1 | filecheck %s --check-prefix=PIPELINE
// PIPELINE: pxla-opt: error: --mlir-print-ir-before: 'pxla-handoff-pipeline' is a pipeline; name one of its passes
