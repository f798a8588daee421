module {
  ml_program.global private mutable @d(dense<"0x0000803F00000040"> : tensor<2xf32>) : tensor<2xf32>
}
