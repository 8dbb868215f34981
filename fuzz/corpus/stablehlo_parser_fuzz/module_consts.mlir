module @jit_main attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main() -> (tensor<2xf32> {jax.result_info = ""}) {
    %0 = call @inputs() : () -> tensor<2xf32>
    %c = stablehlo.constant dense<[1.5, -2.0]> : tensor<2xf32>
    %h = stablehlo.constant dense<"0x0000803F00000040"> : tensor<2xf32>
    %1 = stablehlo.multiply %0, %c : tensor<2xf32>
    %2 = stablehlo.add %1, %h : tensor<2xf32>
    return %2 : tensor<2xf32>
  }
  func.func private @inputs() -> tensor<2xf32> {
    %c = stablehlo.constant dense<1.0> : tensor<2xf32>
    return %c : tensor<2xf32>
  }
}
