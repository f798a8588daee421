module {
  func.func @main() -> !torch.vtensor<[3,4],f32> {
    %0 = "torch.vtensor.literal"() <{value = dense_resource<torch_tensor_3_4_torch.float32> : tensor<3x4xf32>}> : () -> !torch.vtensor<[3,4],f32>
    %1 = "torch.vtensor.literal"() {value = dense_resource<torch_tensor_3_4_torch.float32> : tensor<3x4xf32>} : () -> !torch.vtensor<[3,4],f32>
    %2 = "torch.vtensor.external.literal"() <{name = @torch_tensor_3_4_torch.float32}> {wpack.uri = "wpack:x/y"} : () -> !torch.vtensor<[3,4],f32>
    return %0 : !torch.vtensor<[3,4],f32>
  }
}
{-#
  dialect_resources: {
    builtin: {
      torch_tensor_3_4_torch.float32: "0x040000000000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F0000803F"
    }
  }
#-}
