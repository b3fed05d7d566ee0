// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-verify-handoff)'
// The Shardy form checked as GSPMD: its sdy ops and attributes are errors.
// RUN: not pxla-opt %S/../Inputs/sdy_handoff.mlir --pass-pipeline='builtin.module(pxla-verify-handoff{sharding-dialect=gspmd})' 2>&1 | filecheck %s --check-prefix=AS-GSPMD
// AS-GSPMD: sdy_handoff.mlir:5:3: error: 'sdy.mesh' is not builtin/func/mhlo; this module is checked as GSPMD (sharding-dialect=gspmd): lower it with sharding-dialect=sdy, or without Shardy
// AS-GSPMD: sdy_handoff.mlir:6:3: error: argument 0 of func.func has sdy.sharding in a GSPMD module (sharding-dialect=gspmd): XLA ignores it without Shardy; write mhlo.sharding instead
// AS-GSPMD: error: result 0 of func.func has sdy.sharding in a GSPMD module
// AS-GSPMD: sdy_handoff.mlir:7:10: error: 'sdy.manual_computation' is not builtin/func/mhlo

// expected-error @+1 {{module has no 'mhlo.num_replicas' attribute}}
module @no_counts {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}

// -----

// expected-error @+1 {{mhlo.num_partitions must be between 1 and 1048576, got 0}}
module @zero_partitions attributes {mhlo.num_partitions = 0 : i32, mhlo.num_replicas = 1 : i32} {
}

// -----

module @leftovers attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<2xf32> {
    // expected-error @+1 {{placeholder @pxla.shard was not expanded}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64} : (tensor<8xf32>) -> tensor<2xf32>
    // expected-error @+1 {{'stablehlo.negate' is not builtin/func/mhlo; legalize it with stablehlo-legalize-to-hlo}}
    %1 = stablehlo.negate %0 : tensor<2xf32>
    // Reported once per op name.
    %2 = stablehlo.negate %1 : tensor<2xf32>
    // expected-error @+1 {{'chlo.erf' is not builtin/func/mhlo; legalize it with func.func(chlo-legalize-to-hlo)}}
    %3 = chlo.erf %2 : tensor<2xf32> -> tensor<2xf32>
    return %3 : tensor<2xf32>
  }
}

// -----

module @groups_not_covering attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    // expected-error @+1 {{mhlo.all_reduce (cross-replica, ids 0..3): groups do not cover ids [3]}}
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @ids_out_of_range attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    // expected-error @+1 {{ids [4, 5] are out of range for num_replicas = 4, num_partitions = 1}}
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1, 4], [2, 3, 5]]> : tensor<2x3xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// Groups of different sizes: -1 may only pad the end of a group.

module @misplaced_padding attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    // expected-error @+1 {{replica groups have different sizes (padded with -1): [[0, 1, 2], [-1, 3, -1]]; only all_reduce may have groups of different sizes (-1 only after a group's ids)}}
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1, 2], [-1, 3, -1]]> : tensor<2x3xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

// Overlapping groups and repeated permute targets are caught by the MHLO
// verifier when the module is parsed.

module @overlapping_groups attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<f32>) -> tensor<f32> {
    // expected-error @+2 {{replica id #1 seen more than once}}
    // expected-error @+1 {{failed to infer returned types}}
    %0 = "mhlo.all_reduce"(%x) <{replica_groups = dense<[[0, 1], [1, 3]]> : tensor<2x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = mhlo.add %a, %b : tensor<f32>
      mhlo.return %s : tensor<f32>
    }) : (tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module @partition_ids attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    // Cross-partition ids range over the 2 partitions only.
    // expected-error @+1 {{mhlo.collective_permute (cross-partition, ids 0..1): ids [2] are out of range}}
    %0 = "mhlo.collective_permute"(%x) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, source_target_pairs = dense<[[0, 2]]> : tensor<1x2xi64>}> : (tensor<2xf32>) -> tensor<2xf32>
    %1 = "mhlo.collective_permute"(%0) <{source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<2xf32>) -> tensor<2xf32>
    // Flattened ids range over replicas x partitions (0..3).
    // expected-error @+1 {{mhlo.all_gather (flattened-id, ids 0..3): groups do not cover ids [2, 3]}}
    %2 = "mhlo.all_gather"(%1) <{all_gather_dim = 0 : i64, channel_handle = #mhlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> : (tensor<2xf32>) -> tensor<4xf32>
    return %1 : tensor<2xf32>
  }
}

// -----

module @device_id_warnings attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main() -> tensor<ui32> {
    // expected-warning @+1 {{replica_id is always 0 in a module with num_replicas = 1; did you mean partition_id?}}
    %0 = mhlo.replica_id : tensor<ui32>
    return %0 : tensor<ui32>
  }
}

// -----

module @manual_placeholder attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32, pxla.mesh = "x=8"} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<1xf32> {
    // expected-error @+1 {{placeholder @pxla.full_to_shard was not expanded; run pxla-expand-manual-sharding before handing the module to XLA}}
    %0 = mhlo.custom_call @pxla.full_to_shard(%x) {pxla.dims = [["x"]]} : (tensor<8xf32>) -> tensor<1xf32>
    return %0 : tensor<1xf32>
  }
}

// -----

// The Shardy form (read from the module: it has sdy ops) holds GSPMD constructs.

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=8]>
  // expected-error @+1 {{argument 0 of func.func has mhlo.sharding in a Shardy module: XLA ignores it once Shardy partitions the module; write sdy.sharding instead}}
  func.func public @main(%x: tensor<8xf32> {mhlo.sharding = "{replicated}"}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
    // expected-error @+2 {{mhlo.custom_call has mhlo.sharding in a Shardy module}}
    // expected-error @+1 {{GSPMD custom call @Sharding in a Shardy module: XLA rejects it once Shardy partitions the module; use sdy.manual_computation (pxla-expand-manual-computation)}}
    %0 = mhlo.custom_call @Sharding(%x) {mhlo.sharding = "{devices=[8]<=[8]}"} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// A Shardy mesh must name exactly the module's partitions.

// expected-error @+1 {{the module has no func.func @main}}
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  // expected-error @+1 {{sdy.mesh <["x"=2, "y"=2]> has 4 devices, but the module runs as 1 replicas x 8 partitions; XLA needs mhlo.num_partitions = 4 and mhlo.num_replicas = 1}}
  sdy.mesh @mesh = <["x"=2, "y"=2]>
}

// -----

// expected-error @+1 {{the module has no func.func @main}}
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32} {
  // expected-error @+1 {{sdy.mesh <["x"=8]> has 8 devices, but the module runs as 8 replicas x 1 partitions}}
  sdy.mesh @mesh = <["x"=8]>
}

// -----

// Inside a manual computation: placeholders and collectives are checked too.

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=8]>
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = sdy.manual_computation(%x) in_shardings=[<@mesh, [{"x"}]>] out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"} (%t: tensor<1xf32>) {
      // expected-error @+1 {{placeholder @pxla.shard_to_full was not expanded; run pxla-expand-manual-computation before handing the module to XLA}}
      %1 = mhlo.custom_call @pxla.shard_to_full(%t) {pxla.dims = [["x"]]} : (tensor<1xf32>) -> tensor<8xf32>
      // expected-error @+1 {{mhlo.all_reduce (flattened-id, ids 0..7): groups do not cover ids [4, 5, 6, 7]}}
      %2 = "mhlo.all_reduce"(%t) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = mhlo.add %a, %b : tensor<f32>
        mhlo.return %s : tensor<f32>
      }) : (tensor<1xf32>) -> tensor<1xf32>
      sdy.return %2 : tensor<1xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// expected-error @+1 {{mhlo.num_replicas must be an integer attribute (e.g. 4 : i64), got "4"}}
module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = "4"} {
}

// -----

// GSPMD shardings name partitions: XLA's HLO verifier rejects other ids deep inside the compile.

module @sharding_devices attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  // expected-error @+1 {{argument 0 of func.func has mhlo.sharding = "{maximal device=4}": device 4 is out of range for num_partitions = 4 (a sharding names devices 0..3, a tile assignment each of them once); XLA's HLO verifier would reject it inside the compile}}
  func.func public @main(%x: tensor<8xf32> {mhlo.sharding = "{maximal device=4}"}) -> tensor<8xf32> {
    // expected-error @+1 {{mhlo.custom_call has mhlo.sharding = "{maximal device=99}": device 99 is out of range for num_partitions = 4}}
    %0 = mhlo.custom_call @Sharding(%x) {mhlo.sharding = "{maximal device=99}"} : (tensor<8xf32>) -> tensor<8xf32>
    // expected-error @+1 {{mhlo.sharding = "{devices=[4]0,1,2,5}": devices [5] are out of range for num_partitions = 4}}
    %1 = mhlo.custom_call @Sharding(%0) {mhlo.sharding = "{devices=[4]0,1,2,5}"} : (tensor<8xf32>) -> tensor<8xf32>
    // expected-error @+1 {{mhlo.sharding = "{devices=[4]0,1,1,2}": devices [1] appear more than once in its tile assignment for num_partitions = 4}}
    %2 = mhlo.custom_call @Sharding(%1) {mhlo.sharding = "{devices=[4]0,1,1,2}"} : (tensor<8xf32>) -> tensor<8xf32>
    // expected-error @+1 {{mhlo.sharding = "{devices=[2]0,1}": its tile assignment names 2 devices, not 4, for num_partitions = 4}}
    %3 = mhlo.custom_call @Sharding(%2) {mhlo.sharding = "{devices=[2]0,1}"} : (tensor<8xf32>) -> tensor<8xf32>
    // expected-error @+1 {{mhlo.sharding = "{{replicated}, {maximal device=7}}": device 7 is out of range}}
    %4:2 = mhlo.custom_call @Sharding(%3, %3) {mhlo.sharding = "{{replicated}, {maximal device=7}}"} : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
    // Valid: every partition once, a replicated subgroup, the last device, an iota, a tuple.
    %5 = mhlo.custom_call @Sharding(%4#0) {mhlo.sharding = "{devices=[2,2]3,1,2,0 last_tile_dim_replicate}"} : (tensor<8xf32>) -> tensor<8xf32>
    %6 = mhlo.custom_call @Sharding(%5) {mhlo.sharding = "{maximal device=3}"} : (tensor<8xf32>) -> tensor<8xf32>
    %7 = mhlo.custom_call @Sharding(%6) {mhlo.sharding = "{devices=[4]<=[2,2]T(1,0)}"} : (tensor<8xf32>) -> tensor<8xf32>
    %8:2 = mhlo.custom_call @Sharding(%7, %7) {mhlo.sharding = "{{replicated}, {maximal device=0}}"} : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
    return %8#0 : tensor<8xf32>
  }
}

// -----

// One partition (replica mode): XLA does not partition, and reads no sharding's devices.

module @one_partition attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 4 : i32} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = mhlo.custom_call @Sharding(%x) {mhlo.sharding = "{maximal device=3}"} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// Replicas and partitions together with a tiled sharding: jaxlib would abort the process.
module @replicas_and_tiles attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    // expected-error @+1 {{mhlo.custom_call has mhlo.sharding = "{devices=[4]<=[4]}" in a module of 2 replicas x 4 partitions: jaxlib 0.10.2 aborts the process running a module with both replicas and partitions that carries tiled shardings; lower it in partition mode (mode="partition": mhlo.num_replicas = 1, mhlo.num_partitions = 8)}}
    %0 = mhlo.custom_call @Sharding(%x) {mhlo.sharding = "{devices=[4]<=[4]}"} : (tensor<8xf32>) -> tensor<8xf32>
    // Replicated and maximal shardings are fine.
    %1 = mhlo.custom_call @Sharding(%0) {mhlo.sharding = "{replicated}"} : (tensor<8xf32>) -> tensor<8xf32>
    return %1 : tensor<8xf32>
  }
}

// -----

module @replicas_and_tiled_argument attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 2 : i32} {
  // expected-error @+1 {{argument 0 of func.func has mhlo.sharding = "{devices=[2,2]<=[4] last_tile_dim_replicate}" in a module of 2 replicas x 4 partitions}}
  func.func public @main(%x: tensor<8xf32> {mhlo.sharding = "{devices=[2,2]<=[4] last_tile_dim_replicate}"}) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

// Shardy shardings name partitions too: a mesh written inside a sharding
// (maximal: one device; with axes: all of them) or a mesh symbol without axes.

module @sdy_sharding_devices attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  // expected-error @+1 {{sdy.mesh #sdy.mesh<[], device_ids=[9]>: device 9 is out of range for num_partitions = 4 (a maximal mesh names one of devices 0..3, a mesh with axes all 4 of them); XLA's HLO verifier would reject it inside the compile}}
  sdy.mesh @maximal_mesh_9 = <[], device_ids=[9]>
  // Valid: a maximal mesh on a partition, an empty mesh.
  sdy.mesh @maximal_mesh_3 = <[], device_ids=[3]>
  sdy.mesh @empty = <[]>
  sdy.mesh @mesh = <["x"=4]>
  // expected-error @+1 {{result 0 of func.func has sdy.sharding = #sdy.sharding<mesh<["x"=8]>, [{"x"}]>: its mesh <["x"=8]> has 8 devices, not 4, for num_partitions = 4}}
  func.func public @main(%x: tensor<8xf32> {sdy.sharding = #sdy.sharding<@empty, [{}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<mesh<["x"=8]>, [{"x"}]>}) {
    // expected-error @+1 {{mhlo.add has sdy.sharding = #sdy.sharding_per_value<[<mesh<[], device_ids=[99]>, []>]>: device 99 is out of range for num_partitions = 4 (a maximal mesh names one of devices 0..3, a mesh with axes all 4 of them); XLA's HLO verifier would reject it inside the compile}}
    %0 = mhlo.add %x, %x {sdy.sharding = #sdy.sharding_per_value<[<mesh<[], device_ids=[99]>, []>]>} : tensor<8xf32>
    // expected-error @+1 {{sdy.sharding_constraint has sharding = #sdy.sharding<mesh<["x"=2]>, [{"x"}]>: its mesh <["x"=2]> has 2 devices, not 4, for num_partitions = 4}}
    %1 = sdy.sharding_constraint %0 <mesh<["x"=2]>, [{"x"}]> : tensor<8xf32>
    // expected-error @+1 {{sdy.manual_computation has in_shardings = #sdy.sharding_per_value<[<mesh<["x"=2]>, [{"x"}]>]>: its mesh <["x"=2]> has 2 devices}}
    %2 = sdy.manual_computation(%1) in_shardings=[<mesh<["x"=2]>, [{"x"}]>] out_shardings=[<@mesh, [{"x"}]>] manual_axes={} (%t: tensor<8xf32>) {
      sdy.return %t : tensor<8xf32>
    } : (tensor<8xf32>) -> tensor<8xf32>
    // Valid: device 3, the maximal and empty symbols, a mesh of all 4 devices.
    %3 = mhlo.add %2, %2 {sdy.sharding = #sdy.sharding_per_value<[<mesh<[], device_ids=[3]>, []>]>} : tensor<8xf32>
    %4 = mhlo.add %3, %3 {sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh_3, []>]>} : tensor<8xf32>
    %5 = mhlo.add %4, %4 {sdy.sharding = #sdy.sharding_per_value<[<mesh<["y"=2, "z"=2], device_ids=[3, 2, 1, 0]>, [{"y"}]>]>} : tensor<8xf32>
    return %5 : tensor<8xf32>
  }
}

// -----

// One partition: XLA does not partition, and reads no sharding's devices.

module @sdy_one_partition attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<8xf32>) -> tensor<8xf32> {
    %0 = mhlo.add %x, %x {sdy.sharding = #sdy.sharding_per_value<[<mesh<[], device_ids=[2]>, []>]>} : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// One partition: XLA runs no SPMD partitioner, and a manual region reaches the backend as
// @xla.sdy.GlobalToLocalShape (jax emits none there; pxla-inline-manual-computations removes it).

module attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["i"=1]>
  func.func public @main(%x: tensor<1xf32>) -> tensor<1xf32> {
    // expected-error @+1 {{sdy.manual_computation in a module with mhlo.num_partitions = 1: XLA compiles it without the SPMD partitioner, the one pass that takes a manual region apart (TPU: 'Custom emitter for xla.sdy.GlobalToLocalShape not found'); run pxla-inline-manual-computations}}
    %0 = sdy.manual_computation(%x) in_shardings=[<@mesh, [{"i"}]>] out_shardings=[<@mesh, [{"i"}]>] manual_axes={"i"} (%t: tensor<1xf32>) {
      sdy.return %t : tensor<1xf32>
    } : (tensor<1xf32>) -> tensor<1xf32>
    return %0 : tensor<1xf32>
  }
}

// -----

// A module without @main (a pass before the check removed it): XLA would refuse it.
// expected-error @+1 {{the module has no func.func @main, which XLA runs}}
module @no_main attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @helper(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}
