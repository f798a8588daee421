// torch-mlir style: weights kept out of the IR as #ml_program.extern
module attributes {torch.debug_module_name = "MLP"} {
  ml_program.global public @_param_constant0(#ml_program.extern : tensor<4x3xf32>) : tensor<4x3xf32>
  ml_program.global public @_param_constant1(#ml_program.extern : tensor<4xf32>) : tensor<4xf32>
  ml_program.global private @"fc2.weight"(#ml_program.extern : tensor<2x4xf32>) : tensor<2x4xf32> {noinline}
  ml_program.global private @fc2.bias(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>
  func.func @forward(%arg0: tensor<1x3xf32>) -> tensor<4x3xf32> {
    %0 = ml_program.global_load_const @_param_constant0 : tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
}
