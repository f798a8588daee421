module {
  func.func @main(%arg0: !torch.vtensor<[1,4],f32>) -> !torch.vtensor<[1,3],f32> {
    %0 = torch.vtensor.literal(dense_resource<torch_tensor_3_4_torch.float32> : tensor<3x4xf32>) : !torch.vtensor<[3,4],f32>
    %c = arith.constant dense_resource<blob2> : tensor<3x4xf32>
    return %arg0 : !torch.vtensor<[1,3],f32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      torch_tensor_3_4_torch.float32: "0x040000000000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F",
      blob2: "0x040000000000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F"
    }
  }
#-}
