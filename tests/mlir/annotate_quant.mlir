// fuzz_mlir seed: annotate_locs.mlir after `wpack resolve --annotate --form quant` (tests/cli/test_annotate_quant.sh)
// --annotate fixture: each op that should get stats carries a unique "t.py":N:1 file location
// (not a name) so the checker can find it in what mlir-opt-19 prints.
module {
  ml_program.global private @w0(#ml_program.extern : tensor<4x4xf32>) : tensor<4x4xf32> {wpack.uri = "wpack:fa7543c36ba5fc57/w0", wpack.range = !quant.calibrated<f32<-1.25:2.5>>}
  func.func @forward(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
    %w = ml_program.global_load_const @w0 : tensor<4x4xf32> loc(#loc1)
    %e = tensor.empty() : tensor<4x4xf32> loc(#loc1)
    %m = linalg.matmul {wpack.range = !quant.calibrated<f32<-23.5:18.9>>} ins(%x, %w : tensor<4x4xf32>, tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32> loc(#loc2)
    %c0 = arith.constant dense<0.0> : tensor<4x4xf32> loc("1"("t.py":3:1))
    %r = arith.maximumf %m, %c0 {wpack.axis = 1 : i64, wpack.min = dense<[0.0, -0.5, 0.0, -1.25]> : tensor<4xf32>, wpack.max = dense<[1.5, 2.5, 3.5, 4.5]> : tensor<4xf32>, wpack.absmax = dense<[1.5, 2.5, 3.5, 4.5]> : tensor<4xf32>, foo = 1 : i64} : tensor<4x4xf32> loc(#loc4)
    %c = arith.constant {wpack.min = 2.0 : f32, wpack.max = 2.0 : f32, wpack.absmax = 2.0 : f32} dense<2.0> : tensor<4x4xf32> loc(#loc5)
    %g = linalg.generic {wpack.range = !quant.calibrated<f32<-1.0e-20:1.0e+20>>, indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%r : tensor<4x4xf32>) outs(%e : tensor<4x4xf32>) {
    ^bb0(%a: f32, %b: f32):
      %t = arith.negf %a : f32 loc(fused["layers.0.mlp", "t.py":6:1])
      linalg.yield %t : f32 loc("t.py":6:2)
    } -> tensor<4x4xf32> loc(#loc7)
    %a1 = arith.addf %g, %c {wpack.range = !quant.calibrated<f32<-7.25:7.0>>} : tensor<4x4xf32> loc("layers.0"("t.py":8:1))
    %j = arith.mulf %a1, %a1 {wpack.range = !quant.calibrated<f32<-3.0:0.125>>} : tensor<4x4xf32> loc("{\22stack_trace\22: \22File x.py\22, \22nn_module_stack\22: \22L__self___enc,enc,M.Enc;L__self___enc_fc,enc.fc,torch.nn.modules.linear.Linear\22}"("t.py":9:1))
    return %j : tensor<4x4xf32> loc("layers.0"("t.py":10:1))
  } loc("forward"("t.py":0:1))
}
#loc1 = loc(fused["0", "t.py":1:1])
#loc2 = loc(fused<"meta">["0", "t.py":2:1])
#loc3 = loc("1")
#loc4 = loc(fused[#loc3, "t.py":4:1])
#loc5 = loc(callsite("2" at "t.py":5:1))
#loc7 = loc(fused["layers.0.mlp", "t.py":7:1])
