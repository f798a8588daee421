func.func @f(%a: tensor<4x4xf32>, %c: tensor<4x4xf32>, %n: index) -> tensor<?xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %0 = linalg.matmul ins(%a, %c : tensor<4x4xf32>, tensor<4x4xf32>)
         outs(%c : tensor<4x4xf32>) -> tensor<4x4xf32> loc("mm")
  %2 = linalg.reduce { arith.addf } ins(%0 : tensor<4x4xf32>)
         outs(%e : tensor<4xf32>)
         dimensions = [1] loc("r1")
  %3 = linalg.map { arith.addf }
         ins(%2, %2 : tensor<4xf32>, tensor<4xf32>)
         outs(%e : tensor<4xf32>) loc("m1")
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %4 = scf.for %i = %c0
         to %n
         step %c1 iter_args(%acc = %3) ->
         (tensor<4xf32>) {
    scf.yield %acc : tensor<4xf32>
  }
  %5 = tensor.cast %4 : tensor<4xf32>
         to tensor<?xf32> loc("cs")
  return
    %5 : tensor<?xf32>
}
