module { func.func @f() -> tensor<4xf32> {
    %0 = arith.constant {a} dense_resource<w> : tensor<4xf32>
    %1 = "arith.constant"() <{value = dense_resource<w> : tensor<4xf32>}> : () -> tensor<4xf32>
    %2 = "torch.vtensor.literal"() {k, value = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> !torch.vtensor<[2],f32>
    return %0 : tensor<4xf32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      w: "0x040000000000803F000000400000404000008040"
    }
  }
#-}
