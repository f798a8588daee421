module {
  func.func @dense_literal_83f6ba69f4c7f868() { return }
  func.func @main() -> tensor<4xf32> {
    %0 = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
    %1 = arith.constant {foo} dense<"0x0000803F000000400000404000008040"> : tensor<4xf32> loc("x")
    %2 = "arith.constant"() <{value = dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>}> {bar} : () -> tensor<4xf32>
    %3 = "arith.constant"() {value = dense<2.5> : tensor<4xf16>} : () -> tensor<4xf16>
    %4 = arith.constant dense<[[1, -2], [3, 9223372036854775807]]> : tensor<2x2xi64>
    %5 = arith.constant dense<[1.0, , 2.0]> : tensor<2xf32>
    %6 = arith.constant dense<1.0> : vector<4xf32>
    return %0 : tensor<4xf32>
  }
}
