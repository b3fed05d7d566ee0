// A golden that pins numbers, not just text: inputs drawn with --seed 0,
// results printed as numpy prints them. (The values below are numpy's own:
// x - x.mean(0) and x.sum(0) of np.random.default_rng(0).normal(size=(8, 4)).)
// The module is pxla-mlir emit of pmap(lambda x: (x - pmean(x), psum(x)), out_axes=(0, None)).

// What ran is said on stderr, the results are printed on stdout.
// RUN: pxla-mlir run %s --arg f32[8,4] --seed 0 2> %t.err | filecheck %s
// RUN: filecheck %s --check-prefix=RAN --input-file %t.err
// RAN: ran {{.*}}golden_numbers.mlir on 8 CPU devices (8 replicas)
// RAN-NEXT: layout: global values, laid out by pxla.tile_dims
// RAN-EMPTY:
// CHECK: output[0]: float32[8, 4]
// CHECK-NEXT: {{^\[\[}} 5.8395e-01 -1.4581e-01  8.8185e-01  2.6880e-02]
// CHECK-NEXT: {{^}} [-7.7450e-02  3.4789e-01  1.5454e+00  8.6906e-01]
// CHECK-NEXT: {{^}} [-2.4552e-01 -1.2791e+00 -3.8184e-01 -3.6694e-02]
// CHECK-NEXT: {{^}} ...
// CHECK-NEXT: {{^}} [ 3.2968e-01  1.3528e+00 -4.2376e-01  2.7349e-01]
// CHECK-NEXT: {{^}} [ 1.3617e+00  8.0306e-02 -5.0207e-01 -9.9975e-01]
// CHECK-NEXT: {{^}} [ 4.9350e-04  2.0649e-01 -7.6819e-01 -2.8720e-01]]
// CHECK-NEXT: output[1]: float32[4]
// CHECK-NEXT: {{^}}[-3.6658  0.1096 -1.9314  0.6242]

// The same numbers saved, and checked later (exit 0), or against another seed (exit 1).
// RUN: rm -rf %t && pxla-mlir run %s --seed 0 -o %t > /dev/null
// RUN: pxla-mlir run %s --seed 0 --expect %t | filecheck %s --check-prefix=SAME
// SAME: all 2 results agree
// RUN: not pxla-mlir run %s --seed 1 --expect %t | filecheck %s --check-prefix=OTHER
// OTHER: 0 float32[8,4] {{.*}} DIFFER: 32 elements differ
// OTHER: 2 of 2 results differ

module @pmap_centre attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32, pxla.mesh = "i=8"} {
  func.func public @main(%arg0: tensor<1x4xf32> {pxla.tile_dims = [["i"], []]}) -> (tensor<1x4xf32> {pxla.tile_dims = [["i"], []]}, tensor<4xf32> {pxla.tile_dims = [[]]}) {
    %0 = mhlo.constant dense<8.000000e+00> : tensor<4xf32>
    %1 = mhlo.reshape %arg0 : (tensor<1x4xf32>) -> tensor<4xf32>
    %2 = "mhlo.all_reduce"(%1) <{replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %7 = mhlo.add %arg1, %arg2 : tensor<f32>
      mhlo.return %7 : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %3 = mhlo.divide %2, %0 : tensor<4xf32>
    %4 = mhlo.subtract %1, %3 : tensor<4xf32>
    %5 = "mhlo.all_reduce"(%1) <{replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}> ({
    ^bb0(%arg1: tensor<f32>, %arg2: tensor<f32>):
      %7 = mhlo.add %arg1, %arg2 : tensor<f32>
      mhlo.return %7 : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %6 = mhlo.reshape %4 : (tensor<4xf32>) -> tensor<1x4xf32>
    return %6, %5 : tensor<1x4xf32>, tensor<4xf32>
  }
}
