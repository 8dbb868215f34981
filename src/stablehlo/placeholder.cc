// Placeholder so the stablehlo layer has a translation unit until its sources land.
