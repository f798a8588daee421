module {
  util.global private @p = #flow.parameter.named<"model"::"w"> : tensor<4xf32>
}
