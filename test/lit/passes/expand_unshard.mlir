// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-expand-unshard)' | filecheck %s --check-prefix=GATHER
// RUN: pxla-opt %s --split-input-file --pass-pipeline='builtin.module(pxla-expand-unshard{strategy=all-reduce})' | filecheck %s --check-prefix=REDUCE

// out_axis 1 of axis j (size 4, stride 2) on 8 devices: groups {0,2,4,6}, {1,3,5,7}.

// GATHER-LABEL: func.func public @out_axis_1
// GATHER-SAME: (%[[V:.*]]: tensor<3x5xf32>)
// GATHER-NEXT: %[[U:.*]] = mhlo.reshape %[[V]] : (tensor<3x5xf32>) -> tensor<3x1x5xf32>
// GATHER-NEXT: %[[G:.*]] = "mhlo.all_gather"(%[[U]]) <{all_gather_dim = 1 : i64, channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>, use_global_device_ids}> : (tensor<3x1x5xf32>) -> tensor<3x4x5xf32>
// GATHER-NEXT: return %[[G]]

// Floats are summed as their bit patterns: a float sum would turn -0.0 into +0.0.
// REDUCE-LABEL: func.func public @out_axis_1
// REDUCE-SAME: (%[[V:.*]]: tensor<3x5xf32>)
// REDUCE: %[[B:.*]] = mhlo.bitcast_convert %[[V]] : (tensor<3x5xf32>) -> tensor<3x5xi32>
// REDUCE: %[[Z:.*]] = mhlo.constant dense<0> : tensor<3x4x5xi32>
// REDUCE: %[[U:.*]] = mhlo.reshape %[[B]] : (tensor<3x5xi32>) -> tensor<3x1x5xi32>
// REDUCE: %[[PID:.*]] = mhlo.partition_id
// REDUCE: %[[STRIDE:.*]] = mhlo.constant dense<2> : tensor<ui32>
// REDUCE: %[[Q:.*]] = mhlo.divide %[[PID]], %[[STRIDE]] : tensor<ui32>
// REDUCE: %[[SIZE:.*]] = mhlo.constant dense<4> : tensor<ui32>
// REDUCE: %[[R:.*]] = mhlo.remainder %[[Q]], %[[SIZE]] : tensor<ui32>
// REDUCE: %[[I:.*]] = mhlo.convert %[[R]] : (tensor<ui32>) -> tensor<i32>
// REDUCE: %[[ZERO:.*]] = mhlo.constant dense<0> : tensor<i32>
// REDUCE: %[[P:.*]] = mhlo.dynamic_update_slice %[[Z]], %[[U]], %[[ZERO]], %[[I]], %[[ZERO]] : (tensor<3x4x5xi32>, tensor<3x1x5xi32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<3x4x5xi32>
// REDUCE: %[[S:.*]] = "mhlo.all_reduce"(%[[P]]) <{channel_handle = #mhlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<{{\[\[}}0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>, use_global_device_ids}>
// REDUCE: mhlo.add %{{.*}}, %{{.*}} : tensor<i32>
// REDUCE: }) : (tensor<3x4x5xi32>) -> tensor<3x4x5xi32>
// REDUCE-NEXT: %[[Y:.*]] = mhlo.bitcast_convert %[[S]] : (tensor<3x4x5xi32>) -> tensor<3x4x5xf32>
// REDUCE-NEXT: return %[[Y]]
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @out_axis_1(%v: tensor<3x5xf32>) -> tensor<3x4x5xf32> {
    %0 = mhlo.custom_call @pxla.unshard(%v) {pxla.axis = 1 : i64, pxla.axis_name = "j", pxla.axis_size = 4 : i64, pxla.stride = 2 : i64} : (tensor<3x5xf32>) -> tensor<3x4x5xf32>
    return %0 : tensor<3x4x5xf32>
  }
}

// -----

// Booleans reduce with `or`; channel handles continue after existing ones.

// GATHER-LABEL: func.func public @bools
// GATHER: "mhlo.all_gather"{{.*}}channel_handle = #mhlo.channel_handle<handle = 8, type = 1>{{.*}}replica_groups = dense<{{\[\[}}0, 1], [2, 3], [4, 5], [6, 7]]> : tensor<4x2xi64>

// REDUCE-LABEL: func.func public @bools
// REDUCE: mhlo.constant dense<false> : tensor<2x2xi1>
// REDUCE: "mhlo.all_reduce"
// REDUCE: mhlo.or
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @bools(%v: tensor<2xi1>) -> tensor<2x2xi1> {
    %c = "mhlo.collective_permute"(%v) <{channel_handle = #mhlo.channel_handle<handle = 7, type = 1>, source_target_pairs = dense<[[0, 1]]> : tensor<1x2xi64>}> : (tensor<2xi1>) -> tensor<2xi1>
    %0 = mhlo.custom_call @pxla.unshard(%c) {pxla.axis = 1 : i64, pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2xi1>) -> tensor<2x2xi1>
    return %0 : tensor<2x2xi1>
  }
}

// -----

// Narrow floats keep their width, integers are summed as they are, complex
// numbers as their two parts (two all_reduces, two fresh channels).

// GATHER-LABEL: func.func public @dtypes
// GATHER-COUNT-3: "mhlo.all_gather"

// REDUCE-LABEL: func.func public @dtypes
// REDUCE: mhlo.bitcast_convert %{{.*}} : (tensor<2xbf16>) -> tensor<2xi16>
// REDUCE: "mhlo.all_reduce"{{.*}}handle = 1,
// REDUCE: mhlo.add %{{.*}}, %{{.*}} : tensor<i16>
// REDUCE: mhlo.bitcast_convert %{{.*}} : (tensor<2x2xi16>) -> tensor<2x2xbf16>
// REDUCE-NOT: mhlo.bitcast_convert
// REDUCE: mhlo.constant dense<0> : tensor<2x2xi8>
// REDUCE: "mhlo.all_reduce"{{.*}}handle = 2,
// REDUCE: mhlo.add %{{.*}}, %{{.*}} : tensor<i8>
// REDUCE: %[[RE:.*]] = mhlo.real %[[C:.*]] : (tensor<2xcomplex<f32>>) -> tensor<2xf32>
// REDUCE: mhlo.bitcast_convert %[[RE]] : (tensor<2xf32>) -> tensor<2xi32>
// REDUCE: "mhlo.all_reduce"{{.*}}handle = 3,
// REDUCE: %[[SR:.*]] = mhlo.bitcast_convert %{{.*}} : (tensor<2x2xi32>) -> tensor<2x2xf32>
// REDUCE: %[[IM:.*]] = mhlo.imag %[[C]] : (tensor<2xcomplex<f32>>) -> tensor<2xf32>
// REDUCE: mhlo.bitcast_convert %[[IM]] : (tensor<2xf32>) -> tensor<2xi32>
// REDUCE: "mhlo.all_reduce"{{.*}}handle = 4,
// REDUCE: %[[SI:.*]] = mhlo.bitcast_convert %{{.*}} : (tensor<2x2xi32>) -> tensor<2x2xf32>
// REDUCE: %[[Y:.*]] = mhlo.complex %[[SR]], %[[SI]] : tensor<2x2xcomplex<f32>>
// REDUCE: return {{.*}}, %[[Y]]
module attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @dtypes(%h: tensor<2xbf16>, %i: tensor<2xi8>, %c: tensor<2xcomplex<f32>>) -> (tensor<2x2xbf16>, tensor<2x2xi8>, tensor<2x2xcomplex<f32>>) {
    %0 = mhlo.custom_call @pxla.unshard(%h) {pxla.axis = 0 : i64, pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2xbf16>) -> tensor<2x2xbf16>
    %1 = mhlo.custom_call @pxla.unshard(%i) {pxla.axis = 1 : i64, pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2xi8>) -> tensor<2x2xi8>
    %2 = mhlo.custom_call @pxla.unshard(%c) {pxla.axis = 0 : i64, pxla.axis_size = 2 : i64, pxla.stride = 1 : i64} : (tensor<2xcomplex<f32>>) -> tensor<2x2xcomplex<f32>>
    return %0, %1, %2 : tensor<2x2xbf16>, tensor<2x2xi8>, tensor<2x2xcomplex<f32>>
  }
}
