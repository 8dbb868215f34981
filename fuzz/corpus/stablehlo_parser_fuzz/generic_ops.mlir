func.func @main(%x: tensor<2x3xi32>) -> (tensor<3x2xi32>, tensor<6xi32>) {
  %t = "stablehlo.transpose"(%x) {permutation = array<i64: 1, 0>} : (tensor<2x3xi32>) -> tensor<3x2xi32>
  %r = stablehlo.reshape %x : (tensor<2x3xi32>) -> tensor<6xi32>
  %i = stablehlo.iota dim = 0 : tensor<6xi32>
  %c = stablehlo.compare LT, %r, %i, SIGNED : (tensor<6xi32>, tensor<6xi32>) -> tensor<6xi1>
  %s = stablehlo.select %c, %r, %i : tensor<6xi1>, tensor<6xi32>
  return %t, %s : tensor<3x2xi32>, tensor<6xi32>
}
