module {
  ml_program.global private @x(#ml_program.extern : tensor<2xf32>
}