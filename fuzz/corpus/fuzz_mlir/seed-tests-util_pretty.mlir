module {
  util.global private @fc1.weight : tensor<4x3xf32>
  util.global private @"fc1.bias" {noinline} : tensor<4xf32>
  util.global private mutable @state = dense<0.0> : tensor<4xf32>
}
