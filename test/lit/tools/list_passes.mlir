// RUN: pxla-opt --list-passes | filecheck %s
// CHECK: Passes:
// CHECK: pxla-convert-to-replica-mode {{ *}}Turn a partition-mode per-device MHLO module
// CHECK: pxla-verify-handoff {{ *}}Check that only builtin/func/mhlo (and sdy in the Shardy form) remain
// CHECK-NEXT: num-replicas=<int> (default 0): expected mhlo.num_replicas (0: any)
// CHECK: Pass pipelines:
// CHECK: pxla-handoff-pipeline
// CHECK-NEXT: mode=<replica|partition> (default 'replica')

// CHECK: jaxlib's passes (jaxlib {{[0-9.]+}}
// CHECK: canonicalize, {{.*}}cse
// CHECK: jaxlib's passes on func.func (nest them: func.func(NAME)):
// CHECK-NEXT: chlo-legalize-to-high-level-mhlo, chlo-legalize-to-hlo,
// CHECK: jaxlib's pass pipelines:
// CHECK-NEXT: sdy-export-pipeline, sdy-import-pipeline, sdy-propagation-pipeline

// --help lists them too, after the flags, as mlir-opt's does.
// RUN: pxla-opt --help | filecheck %s --check-prefix=HELP
// HELP: usage: pxla-opt
// HELP: --pass-pipeline PIPELINE
// HELP: Passes:
// HELP: pxla-expand-unshard {{ *}}Expand pxla.unshard into an all_gather
// HELP-NEXT: strategy=<all-gather|all-reduce>
// HELP: Pass pipelines:
// HELP: pxla-pmap-pipeline
// HELP: jaxlib's passes
// HELP: jaxlib's pass pipelines:

// RUN: pxla-opt --version | filecheck %s --check-prefix=VERSION
// VERSION: pxla-opt (pxla-mlir {{[0-9.]+}}) with the MLIR of jaxlib {{[0-9.]+}}

// RUN: pxla-mlir passes | filecheck %s --check-prefix=CLI
// CLI: pxla-convert-to-replica-mode
// RUN: pxla-mlir passes pxla-verify-handoff | filecheck %s --check-prefix=DOC
// DOC: pxla-verify-handoff: checks that a module is ready to hand to XLA.
// DOC: Example:{{$}}
