// io::DequantizeGgml against gguf-py's gguf.quants.dequantize (PyPI's `gguf`, the package
// llama.cpp's own converters use), bit for bit, for every quantized type Tlaloc reads. The
// blocks are random bytes (scales kept finite): every bit of every field is exercised, which a
// quantizer's output would not do (gguf-py cannot quantize K-quants anyway).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "testing/oracle.h"
#include "tlaloc/io/gguf.h"
#include "tlaloc/support/half.h"

namespace tlaloc::io {
namespace {

namespace fs = std::filesystem;

// Byte offsets of a block's f16 scales (they must be finite: gguf-py and ggml agree on NaN and
// infinity too, but a NaN compares unequal to itself).
std::vector<int> HalfOffsets(GgmlType t) {
  switch (t) {
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
      return {0, 2};
    case GgmlType::kQ6_K:
      return {208};
    default:
      return {0};
  }
}

TEST(GgufDequant, EqualsGgufPyBitForBit) {
  if (std::string why = testing::PythonMissing("gguf numpy"); !why.empty()) TL_ORACLE_MISSING(why);
  const fs::path dir =
      fs::temp_directory_path() / ("tlaloc_gguf_dequant_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
  for (GgmlType t : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                     GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    const std::string name(GgmlTypeName(t));
    const int64_t rows = 3, cols = 4 * GgmlBlockElements(t);
    std::vector<std::byte> blocks(GgmlBytes(t, rows * cols));
    for (auto& b : blocks) b = static_cast<std::byte>(byte(rng));
    const int64_t block_bytes = GgmlBlockBytes(t);
    for (size_t b = 0; b < blocks.size(); b += static_cast<size_t>(block_bytes)) {
      for (int off : HalfOffsets(t)) {
        const uint16_t h = FloatToHalfBits(scale(rng));
        std::memcpy(blocks.data() + b + off, &h, 2);
      }
    }
    std::vector<float> ours(static_cast<size_t>(rows * cols));
    ASSERT_TRUE(DequantizeGgml(t, blocks, ours).ok()) << name;

    const fs::path in = dir / (name + ".bin"), out = dir / (name + ".f32");
    std::ofstream(in, std::ios::binary)
        .write(reinterpret_cast<const char*>(blocks.data()),
               static_cast<std::streamsize>(blocks.size()));
    const std::string cmd =
        testing::OraclePython() + " " TLALOC_SOURCE_DIR "/tests/io/gguf_dequant.py " + name + " " +
        std::to_string(rows) + " " + std::to_string(cols) + " " + in.string() + " " + out.string();
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<float> theirs(ours.size());
    std::ifstream f(out, std::ios::binary);
    f.read(reinterpret_cast<char*>(theirs.data()),
           static_cast<std::streamsize>(theirs.size() * sizeof(float)));
    ASSERT_TRUE(f) << "short output from gguf_dequant.py for " << name;
    size_t differing = 0;
    for (size_t i = 0; i < ours.size(); ++i)
      if (std::memcmp(&ours[i], &theirs[i], sizeof(float)) != 0) {
        if (differing++ < 3)
          ADD_FAILURE() << name << " element " << i << ": " << ours[i] << " vs gguf-py "
                        << theirs[i];
      }
    EXPECT_EQ(differing, 0u) << name;
    std::printf("[oracle] %s: %zu values equal to gguf-py's bit for bit\n", name.c_str(),
                ours.size() - differing);
  }
  fs::remove_all(dir);
}

TEST(GgufDequant, RefusesPartialBlocksAndFloatTypes) {
  std::vector<std::byte> blocks(GgmlBlockBytes(GgmlType::kQ4_K));
  std::vector<float> out(255);
  Status s = DequantizeGgml(GgmlType::kQ4_K, blocks, out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("whole blocks of 256"), std::string::npos) << s.message();
  std::vector<float> f32(4);
  EXPECT_FALSE(DequantizeGgml(GgmlType::kF32, blocks, f32).ok());
}

}  // namespace
}  // namespace tlaloc::io
