#extern = #ml_program.extern : tensor<4x3xf32>
#extern1 = #ml_program.extern : tensor<2xi8>
!vec = tensor<2xf32>
"builtin.module"() ({
  "ml_program.global"() <{sym_name = "_param_constant0", sym_visibility = "public", type = tensor<4x3xf32>, value = #extern}> : () -> ()
  "ml_program.global"() <{sym_name = "codes", sym_visibility = "private", type = tensor<2xi8>, value = #extern1}> {keep} : () -> ()
  ml_program.global private @"fc2.bias"(#ml_program.extern : !vec) : !vec loc("x.py":3:4)
  ml_program.global private @"str \22 with \\ escapes"(dense<"0x0102"> : tensor<2xi8>) : tensor<2xi8>
  ml_program.global private @flags(#ml_program.extern : tensor<3xi1>) : tensor<3xi1>
}) : () -> ()
