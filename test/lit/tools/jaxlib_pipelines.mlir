// jaxlib's own pipelines run through pxla-opt, including sdy's, which
// expand to passes that are not registered on their own (sdy-save-module).

// RUN: pxla-opt %s --pass-pipeline='builtin.module(sdy-propagation-pipeline)' | filecheck %s
// CHECK: stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}]>]>}
// RUN: pxla-opt %s --dump-pass-pipeline --pass-pipeline='builtin.module(sdy-import-pipeline,cse)' 2>&1 >/dev/null | filecheck %s --check-prefix=DUMP
// DUMP: Pass pipeline: builtin.module(sdy-import-pipeline,cse)
// RUN: pxla-opt %s --pass-pipeline='builtin.module(sdy-import-pipeline,sdy-export-pipeline)' | filecheck %s --check-prefix=ROUND
// The round trip keeps the mesh (jaxlib 0.12's export writes it inline).
// ROUND: {{sdy\.mesh @mesh|#sdy\.sharding<mesh<\["x"=2\]>, \[\{"x"\}\]>}}
module @m attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=2]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<8xf32> {
    %0 = stablehlo.negate %arg0 : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
