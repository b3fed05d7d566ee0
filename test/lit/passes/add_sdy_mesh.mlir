// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-add-sdy-mesh)' | filecheck %s

// The module's mesh becomes one symbol at the top; pxla.mesh stays.

// CHECK-LABEL: module @two_axes attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"}
// CHECK-NEXT: sdy.mesh @mesh = <["x"=2, "y"=4]>
// CHECK-NEXT: func.func public @main
module @two_axes attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=2,y=4"} {
  func.func public @main(%a: tensor<8xf32>) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

// Running it twice adds nothing; a pmap's inner replicas are one more axis.

// CHECK-LABEL: module @already_there
// CHECK-NEXT: sdy.mesh @mesh = <["host"=2, "_pxla_rep"=4]>
// CHECK-NOT: sdy.mesh
module @already_there attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "host=2,_pxla_rep=4"} {
  sdy.mesh @mesh = <["host"=2, "_pxla_rep"=4]>
  func.func public @main(%a: tensor<8xf32>) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}

// -----

// Another mesh on a placeholder gets its own symbol, after the module's; the
// name @mesh is taken by a function, so the meshes are @mesh_1 and @mesh_2.

// CHECK-LABEL: module @two_meshes
// CHECK-NEXT: sdy.mesh @mesh_1 = <["i"=8]>
// CHECK-NEXT: sdy.mesh @mesh_2 = <["x"=2, "y"=4]>
// CHECK-NEXT: func.func private @mesh
module @two_meshes attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "i=8"} {
  func.func private @mesh() {
    return
  }
  func.func public @main(%a: tensor<8xf32>) -> tensor<8xf32> {
    %0 = mhlo.custom_call @pxla.full_to_shard(%a) {pxla.mesh = "x=2,y=4", pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<4xf32>
    %1 = mhlo.custom_call @pxla.shard_to_full(%0) {pxla.mesh = "x=2,y=4", pxla.dims = [["x"]]} : (tensor<4xf32>) -> tensor<8xf32>
    return %1 : tensor<8xf32>
  }
}

// -----

// No pxla.mesh (a single-device global view): nothing to do.

// CHECK-LABEL: module @no_mesh
// CHECK-NOT: sdy.mesh
module @no_mesh attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<8xf32>) -> tensor<8xf32> {
    return %a : tensor<8xf32>
  }
}
