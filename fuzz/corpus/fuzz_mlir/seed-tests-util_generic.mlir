"builtin.module"() ({
  "util.global"() <{sym_name = "fc1.weight", sym_visibility = "private", type = tensor<4x3xf32>}> : () -> ()
  "util.global"() {sym_name = "fc1.bias", type = tensor<4xf32>} : () -> ()
}) : () -> ()
