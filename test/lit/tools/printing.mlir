// Output options: generic form, locations, -o, the expanded pipeline.

// RUN: pxla-opt %s --mlir-print-op-generic | filecheck %s --check-prefix=GENERIC
// GENERIC: "builtin.module"() <{sym_name = "printing"}>
// GENERIC: "mhlo.negate"

// RUN: pxla-opt %s --mlir-print-debuginfo | filecheck %s --check-prefix=DEBUG
// DEBUG: mhlo.negate {{.*}} loc(#[[LOC:.*]])
// DEBUG: #[[LOC]] = loc("{{.*}}printing.mlir":18:10)

// RUN: pxla-opt %s -o %t.out.mlir && filecheck %s --check-prefix=GENERIC-NOT-USED --input-file %t.out.mlir
// GENERIC-NOT-USED: module @printing

// RUN: pxla-opt %s --dump-pass-pipeline --pass-pipeline='builtin.module(pxla-handoff-pipeline{mode=partition})' 2>&1 >/dev/null | filecheck %s --check-prefix=DUMP
// DUMP: Pass pipeline: builtin.module(func.func(chlo-legalize-to-hlo),stablehlo-legalize-to-hlo{{.*}},canonicalize{{.*}},cse,pxla-verify-handoff{num-replicas=0 num-partitions=0 sharding-dialect=auto})
module @printing attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %0 = mhlo.negate %x : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
