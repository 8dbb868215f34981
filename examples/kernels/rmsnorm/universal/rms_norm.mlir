// RMSNorm over the last axis as a universal (StableHLO) kernel template. Tlaloc instantiates it
// per call site: {{x}} is the operand's tensor type, {{x.rows}}/{{x.cols}} the sizes of x seen as
// [rows, cols], {{attr.eps}} the layer's epsilon. f32 only (see metadata.json "dtypes").
func.func @rms_norm(%x: {{x}}, %w: {{weight}}) -> {{y}} {
  %x2 = stablehlo.reshape %x : ({{x}}) -> tensor<{{x.rows}}x{{x.cols}}xf32>
  %sq = stablehlo.multiply %x2, %x2 : tensor<{{x.rows}}x{{x.cols}}xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<{{x.rows}}x{{x.cols}}xf32>, tensor<f32>) -> tensor<{{x.rows}}xf32>
  %n_int = stablehlo.constant dense<{{x.cols}}> : tensor<i32>
  %n = stablehlo.convert %n_int : (tensor<i32>) -> tensor<f32>
  %n_b = stablehlo.broadcast_in_dim %n, dims = [] : (tensor<f32>) -> tensor<{{x.rows}}xf32>
  %mean = stablehlo.divide %sum, %n_b : tensor<{{x.rows}}xf32>
  %eps = stablehlo.constant dense<{{attr.eps}}> : tensor<f32>
  %eps_b = stablehlo.broadcast_in_dim %eps, dims = [] : (tensor<f32>) -> tensor<{{x.rows}}xf32>
  %var = stablehlo.add %mean, %eps_b : tensor<{{x.rows}}xf32>
  %inv = stablehlo.rsqrt %var : tensor<{{x.rows}}xf32>
  %inv_b = stablehlo.broadcast_in_dim %inv, dims = [0] : (tensor<{{x.rows}}xf32>) -> tensor<{{x.rows}}x{{x.cols}}xf32>
  %w_b = stablehlo.broadcast_in_dim %w, dims = [1] : ({{weight}}) -> tensor<{{x.rows}}x{{x.cols}}xf32>
  %normed = stablehlo.multiply %x2, %inv_b : tensor<{{x.rows}}x{{x.cols}}xf32>
  %scaled = stablehlo.multiply %normed, %w_b : tensor<{{x.rows}}x{{x.cols}}xf32>
  %y = stablehlo.reshape %scaled : (tensor<{{x.rows}}x{{x.cols}}xf32>) -> {{y}}
  return %y : {{y}}
}
