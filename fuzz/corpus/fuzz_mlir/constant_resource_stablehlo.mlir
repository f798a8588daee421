module @jit_f {
  func.func public @main() -> (tensor<4xf32>) {
    %c = stablehlo.constant dense_resource<w.a> : tensor<4xf32>
    %1 = "stablehlo.constant"() <{value = dense_resource<w_b> : tensor<4xf32>}> : () -> tensor<4xf32>
    %2 = "mhlo.constant"() {value = dense_resource<w.a> : tensor<4xf32>} : () -> tensor<4xf32>
    %3 = mhlo.constant {tag} dense_resource<missing> : tensor<4xf32>
    %4 = stablehlo.constant dense_resource<w_b> : tensor<2xf32>
    %5 = stablehlo.add %c, %1 : tensor<4xf32>
    return %5 : tensor<4xf32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      w.a: "0x040000000000803F000000400000404000008040",
      w_b: "0x040000000000803F000000400000404000008040"
    }
  }
#-}
