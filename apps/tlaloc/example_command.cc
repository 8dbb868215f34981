// `tlaloc example`: builds a small program with the builder API, prints it as StableHLO and
// runs it on the interpreter.
#include <cstdio>

#include "commands.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/ir/builder.h"

namespace tlaloc::cli {

namespace {
int RunExample() {
  auto module = std::make_shared<Module>("example");
  TensorType t(ElementType::kF32, {2, 3});
  Function* fn = module->AddFunction("main", {Type(t)}, {Type(t)});
  OpBuilder b(&fn->entry(), module.get());
  Literal c = Literal::FromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Value k = b.CreateOne("stablehlo.constant", {}, {{"value", Attribute::Elements(c)}});
  b.Create("func.return", {k});
  if (!b.ok()) {
    std::fprintf(stderr, "tlaloc example: %s\n", b.status().ToString().c_str());
    return 1;
  }
  auto out = Interpret(*module, "main", {Literal(t)});
  if (!out.ok()) {
    std::fprintf(stderr, "tlaloc example: %s\n", out.status().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", (*out)[0].ToString().c_str());
  return 0;
}
}  // namespace

void RegisterExampleCommand(CLI::App& app) {
  auto* cmd = app.add_subcommand("example", "Build a small program, print it as StableHLO, run it");
  cmd->callback([] { SetExitCode(RunExample()); });
}

}  // namespace tlaloc::cli
