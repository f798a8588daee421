func.func @f(%a: f32) -> f32 {
  %0 = arith.negf %a : f32 loc(#l9)
  return %0 : f32
}
#l0 = loc("m.0")
#l1 = loc(fused[#l0, callsite(#l0 at "x")])
#l2 = loc(fused[#l1, callsite(#l1 at "x")])
#l3 = loc(fused[#l2, callsite(#l2 at "x")])
#l4 = loc(fused[#l3, callsite(#l3 at "x")])
#l5 = loc(fused[#l4, callsite(#l4 at "x")])
#l6 = loc(fused[#l5, callsite(#l5 at "x")])
#l7 = loc(fused[#l6, callsite(#l6 at "x")])
#l8 = loc(fused[#l7, callsite(#l7 at "x")])
#l9 = loc(fused[#l8, callsite(#l8 at "x")])
