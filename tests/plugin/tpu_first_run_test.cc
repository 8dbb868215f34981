// What the first TPU run must record (the runbook's list; the g2b lane of scripts/bringup):
// each test opens a session on libtpu and skips, naming what it looked for, where none resolves.
// On a TPU each prints what it measured and records it as an XML property, so the results
// tarball carries the answers: the platform name, threefry's bits against the interpreter,
// whether the f32 -> bf16 -> f32 convert pair is folded (default and STRICT_PRECISION), where a
// bf16 dot rounds, the on-device size of a bf16 buffer, and that premapped_buffer_size is taken.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>

#include "tlaloc/builder/random.h"
#include "tlaloc/builder/tensor.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/pjrt/pjrt_backend.h"
#include "tlaloc/pjrt/session.h"
#include "tlaloc/support/half.h"

namespace tlaloc::pjrt {
namespace {

class TpuFirstRun : public ::testing::Test {
 protected:
  void SetUp() override {
    PluginResolution r = ResolvePjrtPlugin(PjrtTarget::Tpu(), ResolveEnvironment::Process());
    if (!r.found())
      GTEST_SKIP() << "no TPU here (libtpu does not resolve): " << r.ToStatus().message();
    SessionOptions o;
    o.target = PjrtTarget::Tpu();
    o.plugin_path = r.path;
    auto s = PjrtSession::Open(o);
    ASSERT_TRUE(s.ok()) << "libtpu at " << r.path
                        << " resolves but opens no TPU session: " << s.status().ToString();
    session_ = std::move(*s);
  }
  // Records `value` for the results tarball (gtest XML) and the log.
  void Measured(const std::string& key, const std::string& value) {
    RecordProperty(key, value);
    std::printf("TPU first run: %s = %s\n", key.c_str(), value.c_str());
  }
  // Compiles `mlir`, runs it on `args` and returns the outputs.
  std::vector<Literal> Run(const std::string& mlir, const std::vector<Literal>& args,
                           const CompileOptions& options = {}) {
    auto exe = session_->Compile(mlir, options);
    EXPECT_TRUE(exe.ok()) << exe.status().ToString();
    if (!exe.ok()) return {};
    auto out = session_->Run(**exe, args);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? std::move(*out) : std::vector<Literal>{};
  }
  std::unique_ptr<PjrtSession> session_;
};

TEST_F(TpuFirstRun, PlatformNameReportsTpu) {
  Measured("platform", session_->platform_name() + " " + session_->platform_version());
  for (const auto& d : session_->devices()) {
    Measured("device_" + std::to_string(d.id), d.kind);
  }
  EXPECT_EQ(session_->platform_name(), "tpu");
}

TEST_F(TpuFirstRun, ThreefryUniformBitExactOnTpu) {
  auto module = std::make_shared<Module>("threefry_first_run");
  FunctionBuilder fb(module.get(), "main");
  Tensor bits = RandomBits(PrngKey(fb.ops(), 20261201), {4096});
  Tensor uniform = Uniform(PrngKey(fb.ops(), 7), {4096});
  ASSERT_TRUE(fb.Return({bits, uniform}).ok());
  auto expected = Interpret(*module, "main", {});
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  auto backend = MakePjrtBackend(std::move(session_));
  auto program = backend->Compile(module);
  ASSERT_TRUE(program.ok()) << program.status().ToString();
  auto got = backend->Run(**program, {});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 2u);
  int differing = 0;
  for (size_t i = 0; i < 2; ++i) {
    auto a = (*got)[i].span<uint32_t>();
    auto b = (*expected)[i].span<uint32_t>();
    for (size_t k = 0; k < a.size(); ++k) differing += a[k] != b[k];
  }
  Measured("threefry_words_differing", std::to_string(differing) + " of 8192");
  EXPECT_EQ(differing, 0) << "threefry is integer ops only: any difference is a backend bug";
}

// 1 + 2^-10 is not a bf16: a kept convert pair gives 1, a folded one gives the input back.
constexpr const char* kConvertPair = R"(module @convert_pair {
func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.convert %x : (tensor<4xf32>) -> tensor<4xbf16>
  %1 = stablehlo.convert %0 : (tensor<4xbf16>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
})";

TEST_F(TpuFirstRun, ConvertPairFoldingDefaultAndStrict) {
  const float x = 1.0f + 1.0f / 1024.0f;
  Literal in = Literal::FromVector<float>({4}, {x, x, x, x});
  auto folded = [&](const CompileOptions& o) {
    auto out = Run(kConvertPair, {in}, o);
    return !out.empty() && out[0].span<float>()[0] == x;
  };
  const bool by_default = folded(CompileOptions());
  const bool strict = folded(CompileOptions::StrictPrecision());
  Measured("convert_pair_folded_default", by_default ? "yes" : "no");
  Measured("convert_pair_folded_strict_precision", strict ? "yes" : "no");
  EXPECT_FALSE(strict) << "STRICT_PRECISION (xla_allow_excess_precision = false) must keep it";
}

// 256 + 1 + 1 in bf16 (8 significant bits: 256..512 in steps of 2): rounding once at the op's
// boundary gives 258, rounding after every addition gives 256 (257 ties to even 256).
constexpr const char* kBf16Dot = R"(module @bf16_dot {
func.func public @main(%a: tensor<1x3xbf16>, %b: tensor<3x1xbf16>) -> tensor<1x1xbf16> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<1x3xbf16>, tensor<3x1xbf16>) -> tensor<1x1xbf16>
  return %0 : tensor<1x1xbf16>
}
})";

TEST_F(TpuFirstRun, Bf16DotRoundsWhere) {
  auto bf = [](std::vector<float> v) {
    std::vector<bf16> out;
    for (float f : v) out.push_back(bf16(f));
    return out;
  };
  Literal a = Literal::FromVector<bf16>({1, 3}, bf({256, 1, 1}));
  Literal b = Literal::FromVector<bf16>({3, 1}, bf({1, 1, 1}));
  auto out = Run(kBf16Dot, {a, b});
  ASSERT_EQ(out.size(), 1u);
  const float got = static_cast<float>(out[0].span<bf16>()[0]);
  Measured("bf16_dot_256_1_1", std::to_string(got) + (got == 258   ? " (rounds at the op boundary)"
                                                      : got == 256 ? " (rounds every step)"
                                                                   : " (?)"));
  EXPECT_TRUE(got == 258 || got == 256) << got;
}

TEST_F(TpuFirstRun, Bf16BufferOnDeviceSize) {
  Literal l = Literal::FromVector<bf16>({3, 5}, std::vector<bf16>(15, bf16(1.0f)));
  auto buffer = session_->ToDevice(l);
  ASSERT_TRUE(buffer.ok()) << buffer.status().ToString();
  TL_PJRT_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args, q);
  q.buffer = buffer->raw();
  Status s = TL_PJRT_CALL(session_->api(), Buffer_OnDeviceSizeInBytes, &q);
  ASSERT_TRUE(s.ok()) << s.ToString();
  Measured("bf16_3x5_on_device_bytes", std::to_string(q.on_device_size_in_bytes) +
                                           " (30 unpadded; CUDA pins 2 bytes an element)");
  EXPECT_GE(q.on_device_size_in_bytes, 30u);
}

TEST_F(TpuFirstRun, PremappedBufferSizeAccepted) {
  bool sent = false;
  for (const NamedOption& o : session_->create_options()) {
    if (o.name == "premapped_buffer_size") {
      sent = true;
      Measured("premapped_buffer_size", std::to_string(std::get<int64_t>(o.value)) + " accepted");
    }
  }
  EXPECT_TRUE(sent) << "a TPU session sends premapped_buffer_size (docs/PJRT.md)";
}

}  // namespace
}  // namespace tlaloc::pjrt
