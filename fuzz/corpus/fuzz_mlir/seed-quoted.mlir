module {
  ml_program.global private @"h\22\5Cx"(#ml_program.extern : tensor<3x2xf16>) : tensor<3x2xf16>
}
