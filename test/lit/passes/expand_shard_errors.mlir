// RUN: pxla-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(pxla-expand-shard)'

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @missing(%x: tensor<8xf32>) -> tensor<f32> {
    // expected-error @+1 {{@pxla.shard needs pxla.stride (integer attributes)}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64} : (tensor<8xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @wrong_size(%x: tensor<6xf32>) -> tensor<f32> {
    // expected-error @+1 {{@pxla.shard: dimension 0 of the operand has size 6, but pxla.axis_size is 8}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<6xf32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @wrong_result(%x: tensor<4x3xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{the result must be the operand without dimension 0: shape [3], got [4]}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 4 : i64, pxla.stride = 2 : i64} : (tensor<4x3xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @does_not_fit(%x: tensor<4x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{axis 'j' of size 4 with stride 4 does not fit the module's 8 devices}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_name = "j", pxla.axis_size = 4 : i64, pxla.stride = 4 : i64} : (tensor<4x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @axis_out_of_range(%x: tensor<4x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{pxla.axis = 2 is out of range for a rank-2 value}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 2 : i64, pxla.axis_size = 4 : i64, pxla.stride = 1 : i64} : (tensor<4x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @axis_size_string(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{pxla.axis_size must be an integer attribute (e.g. 4 : i64), got "8"}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = "8", pxla.stride = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @axis_size_unit(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{pxla.axis_size must be an integer attribute (e.g. 4 : i64), got unit}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size, pxla.stride = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @axis_float(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{pxla.axis must be an integer attribute (e.g. 4 : i64), got 5.000000e-01 : f32}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0.5 : f32, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @stride_dict(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{pxla.stride must be an integer attribute (e.g. 4 : i64), got {a = 1 : i64}}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = {a = 1}} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @stride_symbol(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{pxla.stride must be an integer attribute (e.g. 4 : i64), got @s}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = @s} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @stride_bool(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{pxla.stride must be an integer attribute (e.g. 4 : i64), got true}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = true} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @stride_overflows_i32(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{pxla.stride must be between 1 and 2147483647, got 4294967296}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 4294967296 : i64} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @axis_size_zero(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{pxla.axis_size must be between 1 and 2147483647, got 0}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 0 : i64, pxla.stride = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @axis_negative(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{pxla.axis must be between 0 and 2147483647, got -1}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = -1 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @axis_name_integer(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    // expected-error @+1 {{pxla.axis_name must be a string, got 3 : i64}}
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_name = 3 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// Device counts are read with the same checks: no value, zero, too many.

// expected-error @+1 {{mhlo.num_partitions must be an integer attribute (e.g. 4 : i64), got unit}}
module attributes {mhlo.num_partitions, mhlo.num_replicas = 1 : i32} {
  func.func public @unit_count(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// expected-error @+1 {{mhlo.num_replicas must be between 1 and 1048576, got 0}}
module attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 0 : i32} {
  func.func public @zero_replicas(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// expected-error @+1 {{mhlo.num_replicas * mhlo.num_partitions = 2097152 devices is more than the 1048576 supported}}
module attributes {mhlo.num_partitions = 1048576 : i32, mhlo.num_replicas = 2 : i32} {
  func.func public @too_many_devices(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}

// -----

// A legal i32 count, but device tables of 2^31 entries would exhaust memory.

// expected-error @+1 {{mhlo.num_partitions must be between 1 and 1048576, got 2147483647}}
module attributes {mhlo.num_partitions = 2147483647 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @huge_count(%x: tensor<8x3xf32>) -> tensor<3xf32> {
    %0 = mhlo.custom_call @pxla.shard(%x) {pxla.axis = 0 : i64, pxla.axis_size = 8 : i64, pxla.stride = 1 : i64} : (tensor<8x3xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
