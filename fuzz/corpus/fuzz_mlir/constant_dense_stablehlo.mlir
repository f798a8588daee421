module @jit_f attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<4xf32>) -> (tensor<4xf32>) {
    %c = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
    %cst_0 = stablehlo.constant {mhlo.sharding = "{replicated}"} dense<"0x0000803F000000400000404000008040"> : tensor<4xf32>
    %1 = "stablehlo.constant"() <{value = dense<[[1, 2], [3, 4]]> : tensor<2x2xi8>}> : () -> tensor<2x2xi8>
    %2 = "stablehlo.constant"() {value = dense<1.5> : tensor<4xbf16>, tag} : () -> tensor<4xbf16>
    %3 = mhlo.constant dense<[true, false, true, true]> : tensor<4xi1>
    %4 = "mhlo.constant"() {value = dense<"0x0D"> : tensor<4xi1>} : () -> tensor<4xi1>
    %5 = "stablehlo.constant"() <{value = dense<[1, 2, 3, 4]> : tensor<4xi8>}> : () -> tensor<4x!quant.uniform<i8:f32, 1.0>>
    %6 = "stablehlo.constant"() <{value = dense<[1, 2, 3, 4]> : tensor<4xi32>}> : () -> tensor<4xf32>
    %7 = stablehlo.constant() <{value = dense<[1, 2, 3, 4]> : tensor<4xi8>}> : () -> tensor<4xi8>
    %8 = stablehlo.constant dense<[1.0, 2.0]> : tensor<1000000000000xf32>
    %9 = stablehlo.add %c, %cst_0 : tensor<4xf32>
    return %9 : tensor<4xf32>
  }
}
