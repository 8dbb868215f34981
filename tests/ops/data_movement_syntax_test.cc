// Pretty syntax of the data-movement ops: the forms JAX emits (as in the conformance programs)
// parse into the generic attributes, run, print back in the same form, and malformed text fails
// with a message naming the problem.
#include <sstream>

#include "ops/data_movement_test_util.h"
#include "tlaloc/stablehlo/parser.h"
#include "tlaloc/stablehlo/printer.h"

namespace tlaloc::dmtest {
namespace {

constexpr const char* kProgram = R"(module @m {
  func.func public @main(%a: tensor<2x3xf32>, %s: tensor<f32>, %i: tensor<i64>, %idx: tensor<2x1xi64>) -> (tensor<2x3x4xf32>, tensor<3x2xf32>, tensor<6xf32>, tensor<2x3xf32>, tensor<1x2xf32>, tensor<4x3xf32>, tensor<5x4xf32>, tensor<1x2xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x0xf32>) {
    %0 = stablehlo.broadcast_in_dim %a, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<2x3x4xf32>
    %1 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %2 = stablehlo.reshape %a : (tensor<2x3xf32>) -> tensor<6xf32>
    %3 = stablehlo.reverse %a, dims = [1] : tensor<2x3xf32>
    %4 = stablehlo.slice %a [1:2, 0:3:2] : (tensor<2x3xf32>) -> tensor<1x2xf32>
    %5 = stablehlo.concatenate %a, %a, dim = 0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %6 = stablehlo.pad %a, %s, low = [1, 0], high = [2, 1], interior = [0, 0] : (tensor<2x3xf32>, tensor<f32>) -> tensor<5x4xf32>
    %7 = stablehlo.dynamic_slice %a, %i, %i, sizes = [1, 2] : (tensor<2x3xf32>, tensor<i64>, tensor<i64>) -> tensor<1x2xf32>
    %8 = stablehlo.dynamic_update_slice %a, %7, %i, %i : (tensor<2x3xf32>, tensor<1x2xf32>, tensor<i64>, tensor<i64>) -> tensor<2x3xf32>
    %9 = "stablehlo.gather"(%a, %idx) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 3>}> : (tensor<2x3xf32>, tensor<2x1xi64>) -> tensor<2x3xf32>
    %10 = "stablehlo.scatter"(%a, %idx, %9) <{scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = true}> ({
    ^bb0(%arg0: tensor<f32>, %arg1: tensor<f32>):
      %12 = stablehlo.add %arg0, %arg1 : tensor<f32>
      stablehlo.return %12 : tensor<f32>
    }) : (tensor<2x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %11 = stablehlo.pad %a, %s, low = [0, -2], high = [0, -3], interior = [0, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x0xf32>
    return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11 : tensor<2x3x4xf32>, tensor<3x2xf32>, tensor<6xf32>, tensor<2x3xf32>, tensor<1x2xf32>, tensor<4x3xf32>, tensor<5x4xf32>, tensor<1x2xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x0xf32>
  }
})";

std::vector<int64_t> Ints(const Operation* op, const std::string& name) {
  return GetIntArrayAttr(op->attrs(), name);
}

const Operation* FindOp(const Module& m, const std::string& name, int nth = 0) {
  for (const auto& op : m.Find("main")->entry().operations())
    if (op->name() == name && nth-- == 0) return op.get();
  return nullptr;
}

TEST(DataMovementSyntax, PrettyFormsParseIntoGenericAttributes) {
  auto m = ParseModule(kProgram);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const Module& mod = **m;
  EXPECT_EQ(Ints(FindOp(mod, "stablehlo.broadcast_in_dim"), "broadcast_dimensions"),
            (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(Ints(FindOp(mod, "stablehlo.transpose"), "permutation"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(Ints(FindOp(mod, "stablehlo.reverse"), "dimensions"), (std::vector<int64_t>{1}));
  const Operation* slice = FindOp(mod, "stablehlo.slice");
  EXPECT_EQ(Ints(slice, "start_indices"), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(Ints(slice, "limit_indices"), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Ints(slice, "strides"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(FindOp(mod, "stablehlo.concatenate")->attrs().at("dimension"),
            Attribute::Int(0, ElementType::kS64));
  const Operation* pad = FindOp(mod, "stablehlo.pad", 1);
  EXPECT_EQ(Ints(pad, "edge_padding_low"), (std::vector<int64_t>{0, -2}));
  EXPECT_EQ(Ints(pad, "edge_padding_high"), (std::vector<int64_t>{0, -3}));
  EXPECT_EQ(Ints(pad, "interior_padding"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(Ints(FindOp(mod, "stablehlo.dynamic_slice"), "slice_sizes"),
            (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(FindOp(mod, "stablehlo.dynamic_update_slice")->num_operands(), 4);
}

TEST(DataMovementSyntax, RunsAndPrintsBackInTheSameForms) {
  auto m = ParseModule(kProgram);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::string printed = PrintModule(**m);
  for (const char* form :
       {"stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<2x3x4xf32>",
        "stablehlo.transpose %arg0, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>",
        "stablehlo.reverse %arg0, dims = [1] : tensor<2x3xf32>",
        "stablehlo.slice %arg0 [1:2, 0:3:2] : (tensor<2x3xf32>) -> tensor<1x2xf32>",
        "stablehlo.concatenate dim = 0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>",
        "stablehlo.pad low = [0, -2], high = [0, -3], interior = [0, 1] :",
        "stablehlo.dynamic_slice sizes = [1, 2] :",
        "stablehlo.reshape %arg0 : (tensor<2x3xf32>) -> tensor<6xf32>"}) {
    // Value names may be renamed by the printer: look for a line holding the op name and the
    // text after its first operand.
    std::string f = form;
    std::string op_name = f.substr(0, f.find(' '));
    std::string tail = f.find("%arg0") != std::string::npos ? f.substr(f.find("%arg0") + 5)
                                                            : f.substr(f.find(' ') + 1);
    bool found = false;
    std::istringstream lines(printed);
    for (std::string line; std::getline(lines, line);)
      found = found ||
              (line.find(op_name) != std::string::npos && line.find(tail) != std::string::npos);
    EXPECT_TRUE(found) << "missing `" << form << "` in\n" << printed;
  }
  auto again = ParseModule(printed, "printed");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << printed;
  EXPECT_EQ(PrintModule(**again), printed);

  Literal a = Literal::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = Interpret(**again, "main",
                       {a, Literal::Scalar<float>(0.5f), Literal::Scalar<int64_t>(1),
                        Literal::FromVector<int64_t>({2, 1}, {1, 1})});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(Values<float>((*out)[4]), (std::vector<float>{4, 6}));  // slice
  EXPECT_EQ(Values<float>((*out)[7]), (std::vector<float>{5, 6}));  // dynamic_slice clamps
  EXPECT_EQ(Values<float>((*out)[9]), (std::vector<float>{4, 5, 6, 4, 5, 6}));  // gather
  // scatter-add of both gathered rows into row 1.
  EXPECT_EQ(Values<float>((*out)[10]), (std::vector<float>{1, 2, 3, 12, 15, 18}));
  EXPECT_EQ((*out)[11].num_elements(), 0);
}

TEST(DataMovementSyntax, MalformedFormsNameTheProblem) {
  auto bad_slice = ParseModule(R"(func.func @main(%a: tensor<4xf32>) -> tensor<2xf32> {
    %0 = stablehlo.slice %a [0;2] : (tensor<4xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  })");
  ASSERT_FALSE(bad_slice.ok());
  EXPECT_NE(bad_slice.status().message().find("2:"), std::string::npos)
      << bad_slice.status().message();
  auto bad_shape = ParseModule(R"(func.func @main(%a: tensor<4xf32>) -> tensor<3xf32> {
    %0 = stablehlo.slice %a [0:2] : (tensor<4xf32>) -> tensor<3xf32>
    return %0 : tensor<3xf32>
  })");
  ASSERT_FALSE(bad_shape.ok());
  EXPECT_NE(bad_shape.status().message().find("tensor<2xf32>"), std::string::npos)
      << bad_shape.status().message();
  auto no_dims = ParseModule(R"(func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.transpose %a : (tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  })");
  ASSERT_FALSE(no_dims.ok());
}

}  // namespace
}  // namespace tlaloc::dmtest
