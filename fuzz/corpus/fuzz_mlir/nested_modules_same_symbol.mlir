module {
  module @a {
    ml_program.global private @w(dense<[1.0, 2.0]> : tensor<2xf32>) : tensor<2xf32>
  }
  module @b {
    ml_program.global private @w(dense<[3.0, 4.0]> : tensor<2xf32>) : tensor<2xf32>
  }
}
