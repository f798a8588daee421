module {
  ml_program.global private @"abc(#ml_program.extern : tensor<2xf32>) : tensor<2xf32>
}