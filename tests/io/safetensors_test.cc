#include "tlaloc/io/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "io_test_util.h"

namespace tlaloc::io {
namespace {

using testing::BuildSafetensors;
using testing::TempDir;

// A tensor of `et` whose bytes are all distinct-ish (so misplaced bytes show).
Literal PatternLiteral(ElementType et, std::vector<int64_t> dims, int seed) {
  Literal l{TensorType(et, std::move(dims))};
  for (int64_t i = 0; i < l.byte_size(); ++i)
    l.data()[i] = static_cast<std::byte>((i * 7 + seed * 13 + 1) & 0xff);
  if (et == ElementType::kPred)  // pred bytes must be 0 or 1
    for (int64_t i = 0; i < l.byte_size(); ++i)
      l.data()[i] = static_cast<std::byte>((i + seed) & 1);
  return l;
}

bool InRange(const void* p, std::span<const std::byte> range) {
  auto* b = static_cast<const std::byte*>(p);
  return b >= range.data() && b < range.data() + range.size();
}

TEST(SafetensorsDtype, EveryElementTypeRoundTripsThroughItsName) {
  for (ElementType et : kAllElementTypes) {
    std::string_view name = SafetensorsDtypeName(et);
    auto back = ElementTypeFromSafetensorsDtype(name);
    ASSERT_TRUE(back.ok()) << name << ": " << back.status().message();
    EXPECT_EQ(*back, et) << name;
  }
  EXPECT_EQ(SafetensorsDtypeName(ElementType::kPred), "BOOL");
  EXPECT_EQ(SafetensorsDtypeName(ElementType::kBF16), "BF16");
  EXPECT_EQ(SafetensorsDtypeName(ElementType::kS64), "I64");
}

TEST(SafetensorsDtype, TypesTlalocLacksAreRefusedByName) {
  for (const char* name :
       {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "F4", "F6_E2M3", "C64"}) {
    auto r = ElementTypeFromSafetensorsDtype(name);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented) << name;
    EXPECT_NE(r.status().message().find(name), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("not supported"), std::string::npos);
  }
  EXPECT_ERROR_CONTAINS(ElementTypeFromSafetensorsDtype("float32"), "unknown dtype \"float32\"");
}

TEST(Safetensors, WritesAndReadsEveryDtypeWithMetadata) {
  TempDir dir;
  std::vector<NamedTensor> tensors;
  int seed = 0;
  for (ElementType et : kAllElementTypes) {
    tensors.push_back({"t." + std::string(ShortName(et)), PatternLiteral(et, {3, 5}, seed++)});
  }
  tensors.push_back({"scalar", Literal::Scalar<float>(2.5f)});
  tensors.push_back({"empty", Literal(TensorType(ElementType::kF32, {0, 4}))});
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "héllo \"q\""}};
  const auto path = dir / "all.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, tensors, metadata).ok());

  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ((*file)->metadata(), metadata);
  EXPECT_EQ((*file)->tensors().size(), tensors.size());
  for (const auto& t : tensors) {
    auto got = (*file)->Get(t.name);
    ASSERT_TRUE(got.ok()) << t.name << ": " << got.status().message();
    EXPECT_EQ(got->type(), t.value.type()) << t.name;
    EXPECT_TRUE(got->BitwiseEquals(t.value)) << t.name;
  }
  EXPECT_ERROR_CONTAINS((*file)->Get("missing"), "no tensor named \"missing\"", "all.safetensors");
}

TEST(Safetensors, TensorsAreZeroCopyViewsOfTheMappingThatOutliveTheFileObject) {
  TempDir dir;
  const auto path = dir / "w.safetensors";
  Literal w = Literal::FromVector<float>({2, 2}, {1, 2, 3, 4});
  Literal b = Literal::FromVector<uint16_t>({3}, {7, 8, 9});
  ASSERT_TRUE(WriteSafetensors(path, std::vector<NamedTensor>{{"w", w}, {"b", b}}).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto view = (*file)->Get("w");
  ASSERT_TRUE(view.ok());
  EXPECT_TRUE(InRange(view->data(), (*file)->bytes()));
  EXPECT_TRUE(InRange(view->data() + view->byte_size() - 1, (*file)->bytes()));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(view->data()) % alignof(float), 0u);
  auto view_b = (*file)->Get("b");
  ASSERT_TRUE(view_b.ok());
  EXPECT_TRUE(InRange(view_b->data(), (*file)->bytes()));

  // Dropping the file object keeps the mapping alive through the views.
  file = Status(StatusCode::kAborted, "released");
  EXPECT_EQ(view->span<float>()[3], 4.0f);
  EXPECT_EQ(view_b->span<uint16_t>()[2], 9);

  // Writing through a view changes the process's copy only, never the file.
  view->span<float>()[0] = 42.0f;
  auto again = SafetensorsFile::Open(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Get("w")->span<float>()[0], 1.0f);
}

// kGivenOrder keeps the caller's order within a dtype (the reference layout sorts by name), and
// ViewOfRun views consecutive same-dtype tensors as one, refusing runs that are out of order,
// of another dtype or of another size.
TEST(Safetensors, GivenOrderLaysTensorsOutAsGivenAndRunsViewAsOne) {
  TempDir dir;
  const auto path = dir / "experts.safetensors";
  std::vector<NamedTensor> tensors = {{"e.2", Literal::FromVector<float>({2}, {1, 2})},
                                      {"e.10", Literal::FromVector<float>({2}, {3, 4})},
                                      {"s", Literal::FromVector<uint16_t>({1}, {5})},
                                      {"e.1", Literal::FromVector<float>({2}, {6, 7})}};
  ASSERT_TRUE(WriteSafetensors(path, tensors, {}, SafetensorsLayout::kGivenOrder).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().message();
  const auto* e2 = (*file)->Find("e.2");
  const auto* e10 = (*file)->Find("e.10");
  const auto* e1 = (*file)->Find("e.1");
  const auto* s = (*file)->Find("s");
  ASSERT_TRUE(e2 && e10 && e1 && s);
  EXPECT_EQ(e10->data_begin, e2->data_end);  // by name, e.1 and e.10 would come first
  EXPECT_EQ(e1->data_begin, e10->data_end);
  EXPECT_GT(s->data_begin, e1->data_begin);  // the u16 after every f32 (alignment)

  std::vector<const SafetensorsTensorInfo*> run = {e2, e10, e1};
  auto view = (*file)->ViewOfRun(run, TensorType(ElementType::kF32, {3, 2}));
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->data(), (*file)->Get("e.2")->data());
  EXPECT_EQ(view->span<float>()[3], 4.0f);
  EXPECT_EQ(view->span<float>()[5], 7.0f);
  std::vector<const SafetensorsTensorInfo*> shuffled = {e10, e2, e1};
  EXPECT_FALSE((*file)->ViewOfRun(shuffled, TensorType(ElementType::kF32, {3, 2})).has_value());
  EXPECT_FALSE((*file)->ViewOfRun(run, TensorType(ElementType::kF32, {2, 2})).has_value());
  EXPECT_FALSE((*file)->ViewOfRun(run, TensorType(ElementType::kS32, {3, 2})).has_value());

  // The reference layout of the same tensors orders them by name: no run in expert order.
  const auto ref_path = dir / "reference.safetensors";
  ASSERT_TRUE(WriteSafetensors(ref_path, tensors).ok());
  auto ref = SafetensorsFile::Open(ref_path);
  ASSERT_TRUE(ref.ok());
  std::vector<const SafetensorsTensorInfo*> ref_run = {(*ref)->Find("e.2"), (*ref)->Find("e.10"),
                                                       (*ref)->Find("e.1")};
  EXPECT_FALSE((*ref)->ViewOfRun(ref_run, TensorType(ElementType::kF32, {3, 2})).has_value());
}

// The written bytes, decoded independently of the reader, follow the format specification.
TEST(Safetensors, WrittenBytesFollowTheSpecification) {
  std::vector<NamedTensor> tensors = {
      {"b_u8", PatternLiteral(ElementType::kU8, {3}, 1)},
      {"a_f32", PatternLiteral(ElementType::kF32, {2, 3}, 2)},
      {"z_bool", PatternLiteral(ElementType::kPred, {5}, 3)},
      {"c_bf16", PatternLiteral(ElementType::kBF16, {7}, 4)},
      {"a_u64", PatternLiteral(ElementType::kU64, {2}, 5)},
      {"b_f32", PatternLiteral(ElementType::kF32, {1}, 6)},
      {"m_i64", PatternLiteral(ElementType::kS64, {1}, 7)},
      {"m_f64", PatternLiteral(ElementType::kF64, {2}, 8)},
      {"q_i16", PatternLiteral(ElementType::kS16, {3}, 9)},
      {"q_u16", PatternLiteral(ElementType::kU16, {1}, 10)},
  };
  auto bytes = SerializeSafetensors(tensors, {{"format", "pt"}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  const auto& b = *bytes;
  ASSERT_GE(b.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(b[i]);
  EXPECT_EQ(n % 8, 0u) << "header length must pad to 8";
  ASSERT_LE(8 + n, b.size());
  std::string header(reinterpret_cast<const char*>(b.data() + 8), n);
  size_t last = header.find_last_not_of(' ');
  ASSERT_NE(last, std::string::npos);
  EXPECT_EQ(header[last], '}') << "padding must be spaces after the JSON";
  EXPECT_EQ(header.find(' '), last + 1) << "compact JSON: the only spaces are the padding";
  EXPECT_EQ(header.rfind("{\"__metadata__\":{\"format\":\"pt\"}", 0), 0u) << header;

  auto j = nlohmann::ordered_json::parse(header.substr(0, last + 1));
  // The reference writer's order: dtypes by descending position in its Dtype enum, then name.
  const std::vector<std::string> enum_order = {"BOOL", "U8",  "I8",  "I16", "U16", "F16", "BF16",
                                               "I32",  "U32", "F32", "F64", "I64", "U64"};
  auto rank = [&](const std::string& d) {
    return std::find(enum_order.begin(), enum_order.end(), d) - enum_order.begin();
  };
  std::vector<std::pair<std::string, std::string>> order;  // (dtype, name) in header order
  uint64_t expected_begin = 0;
  const uint64_t data_start = 8 + n;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& e = it.value();
    std::string dtype = e["dtype"];
    order.push_back({dtype, it.key()});
    uint64_t begin = e["data_offsets"][0], end = e["data_offsets"][1];
    EXPECT_EQ(begin, expected_begin) << it.key() << ": data must be contiguous";
    expected_begin = end;
    const NamedTensor* src = nullptr;
    for (const auto& t : tensors)
      if (t.name == it.key()) src = &t;
    ASSERT_NE(src, nullptr) << it.key();
    EXPECT_EQ(e["shape"].get<std::vector<int64_t>>(), src->value.dims());
    ASSERT_EQ(end - begin, static_cast<uint64_t>(src->value.byte_size()));
    EXPECT_EQ((data_start + begin) % ElementSize(src->value.element_type()), 0u)
        << it.key() << " must start aligned";
    EXPECT_EQ(std::memcmp(b.data() + data_start + begin, src->value.data(), end - begin), 0)
        << it.key();
  }
  EXPECT_EQ(order.size(), tensors.size());
  EXPECT_EQ(data_start + expected_begin, b.size()) << "no bytes after the last tensor";
  for (size_t i = 1; i < order.size(); ++i) {
    auto ra = rank(order[i - 1].first), rb = rank(order[i].first);
    EXPECT_TRUE(ra > rb || (ra == rb && order[i - 1].second < order[i].second))
        << order[i - 1].second << " before " << order[i].second;
  }
}

// The reference implementation's own serialization examples, rebuilt from their JSON.
TEST(Safetensors, MatchesTheReferenceImplementationsExamples) {
  auto expect_image = [](std::span<const NamedTensor> tensors,
                         const std::map<std::string, std::string>& meta, std::string json,
                         const std::vector<std::byte>& data) {
    auto bytes = SerializeSafetensors(tensors, meta);
    ASSERT_TRUE(bytes.ok());
    json.resize((json.size() + 7) / 8 * 8, ' ');
    std::vector<uint8_t> raw;
    for (std::byte d : data) raw.push_back(static_cast<uint8_t>(d));
    EXPECT_EQ(*bytes, BuildSafetensors(json, raw));
  };
  Literal attn = Literal::FromVector<float>({1, 2, 3}, {0, 1, 2, 3, 4, 5});
  std::vector<std::byte> attn_bytes(attn.data(), attn.data() + attn.byte_size());
  expect_image(std::vector<NamedTensor>{{"attn.0", attn}}, {},
               R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})", attn_bytes);
  expect_image({}, {}, "{}", {});
  expect_image({}, {{"framework", "pt"}}, R"({"__metadata__":{"framework":"pt"}})", {});
  auto empty = SerializeSafetensors({});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->size(), 16u);  // 8-byte length + "{}" padded to 8
}

TEST(Safetensors, WriterRefusesBadInput) {
  Literal x = Literal::Scalar<float>(1);
  EXPECT_ERROR_CONTAINS(SerializeSafetensors(std::vector<NamedTensor>{{"a", x}, {"a", x}}),
                        "\"a\" given twice");
  EXPECT_ERROR_CONTAINS(SerializeSafetensors(std::vector<NamedTensor>{{"__metadata__", x}}),
                        "reserved");
  EXPECT_ERROR_CONTAINS(SerializeSafetensors(std::vector<NamedTensor>{{"none", Literal()}}),
                        "\"none\" has no data");
  EXPECT_ERROR_CONTAINS(SerializeSafetensors(std::vector<NamedTensor>{{"bad\xff", x}}), "UTF-8");
  TempDir dir;
  EXPECT_ERROR_CONTAINS(
      WriteSafetensors(dir / "no/such/dir/x.safetensors", std::vector<NamedTensor>{{"a", x}}),
      "cannot create");
}

TEST(Safetensors, ParsesHandBuiltHeadersInAnyOffsetOrder) {
  // Entries listed out of data order, and tensors of size zero, are valid.
  std::string header = R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]},)"
                       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("z":{"dtype":"F32","shape":[0,3],"data_offsets":[6,6]},)"
                       R"("__metadata__":{"k":"v"}})";
  header.resize((header.size() + 7) / 8 * 8, ' ');
  auto file = SafetensorsFile::FromBytes(BuildSafetensors(header, {0, 0, 128, 63, 9, 10}));
  ASSERT_TRUE(file.ok()) << file.status().message();
  const auto& ts = (*file)->tensors();
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_EQ(ts[0].name, "a");
  EXPECT_EQ(ts[1].name, "b");
  EXPECT_EQ(ts[2].name, "z");
  EXPECT_EQ((*file)->Get("a")->span<float>()[0], 1.0f);
  EXPECT_EQ((*file)->Get("b")->span<uint8_t>()[1], 10);
  EXPECT_EQ((*file)->Get("z")->num_elements(), 0);
  EXPECT_EQ((*file)->metadata().at("k"), "v");
  EXPECT_EQ((*file)->header().data_size, 6u);
}

TEST(Safetensors, MisalignedTensorsAreCopiedIntoAlignedStorage) {
  // A 5-byte header puts the data at offset 13, which no f32 may start at.
  std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.resize(((header.size() + 3) / 4) * 4 + 1, ' ');
  auto bytes = BuildSafetensors(header, {0, 0, 128, 63, 0, 0, 0, 64});
  auto file = SafetensorsFile::FromBytes(bytes);
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto a = (*file)->Get("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % 4, 0u);
  EXPECT_FALSE(InRange(a->data(), (*file)->bytes()));
  EXPECT_EQ(a->span<float>()[0], 1.0f);
  EXPECT_EQ(a->span<float>()[1], 2.0f);
}

struct BadCase {
  const char* what;
  std::string header;
  std::vector<uint8_t> data;
  std::vector<const char*> fragments;
};

TEST(Safetensors, EveryValidationErrorNamesFileTensorAndProblem) {
  const std::string t = R"("t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  std::vector<BadCase> cases = {
      {"invalid json", R"({"t":{"dtype":"F32",)", {}, {"not valid JSON"}},
      {"not an object", "[1,2]", {}, {"must be a JSON object", "array"}},
      {"metadata not object", R"({"__metadata__":[1]})", {}, {"\"__metadata__\" must be"}},
      {"metadata value", R"({"__metadata__":{"a":1}})", {}, {"__metadata__ entry \"a\"", "string"}},
      {"entry not object", R"({"t":5})", {}, {"tensor \"t\"", "entry must be an object"}},
      {"missing dtype",
       R"({"t":{"shape":[1],"data_offsets":[0,4]}})",
       {0, 0, 0, 0},
       {"tensor \"t\"", "missing \"dtype\""}},
      {"missing shape",
       R"({"t":{"dtype":"F32","data_offsets":[0,4]}})",
       {0, 0, 0, 0},
       {"missing \"shape\""}},
      {"missing offsets",
       R"({"t":{"dtype":"F32","shape":[1]}})",
       {0, 0, 0, 0},
       {"missing \"data_offsets\""}},
      {"dtype not string",
       R"({"t":{"dtype":3,"shape":[1],"data_offsets":[0,4]}})",
       {},
       {"\"dtype\" must be a string"}},
      {"fp8 dtype",
       R"({"t":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[0,4]}})",
       {0, 0, 0, 0},
       {"tensor \"t\"", "F8_E4M3", "not supported"}},
      {"unknown dtype",
       R"({"t":{"dtype":"Q4","shape":[4],"data_offsets":[0,4]}})",
       {0, 0, 0, 0},
       {"tensor \"t\"", "unknown dtype \"Q4\""}},
      {"shape not array",
       R"({"t":{"dtype":"F32","shape":4,"data_offsets":[0,4]}})",
       {},
       {"\"shape\" must be an array"}},
      {"negative dim",
       R"({"t":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,4]}})",
       {},
       {"tensor \"t\"", "shape[1]", "non-negative integer", "-1"}},
      {"fractional dim",
       R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})",
       {},
       {"shape[0]", "1.5"}},
      {"overflowing shape",
       R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})",
       {},
       {"tensor \"t\"", "overflows"}},
      {"huge dim",
       R"({"t":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,4]}})",
       {},
       {"shape[0]", "below 2^63"}},
      {"offsets length",
       R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}})",
       {},
       {"\"data_offsets\" must be an array [begin, end]"}},
      {"negative offset",
       R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})",
       {},
       {"data_offsets[0]", "non-negative"}},
      {"reversed offsets",
       R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})",
       {},
       {"tensor \"t\"", "end before they begin"}},
      {"size mismatch",
       R"({"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
       std::vector<uint8_t>(20),
       {"tensor \"t\"", "[2,3]", "needs 24 bytes", "cover 20"}},
      {"duplicate tensor", "{" + t + "," + t + "}", {0, 0, 0, 0}, {"tensor \"t\" appears twice"}},
      {"duplicate key in entry",
       R"({"t":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
       {0, 0, 0, 0},
       {"key \"dtype\" appears twice"}},
      {"gap",
       R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
       R"("b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})",
       std::vector<uint8_t>(12),
       {"tensor \"b\"", "leaves a gap after", "\"a\"", "without gaps"}},
      {"overlap",
       R"({"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})",
       std::vector<uint8_t>(12),
       {"tensor \"b\"", "overlaps", "\"a\" ending at 8"}},
      {"hole at start",
       R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})",
       std::vector<uint8_t>(8),
       {"tensor \"a\"", "starts at data offset 4", "offset 0"}},
      {"trailing bytes",
       "{" + t + "}",
       std::vector<uint8_t>(8),
       {"cover 4 bytes of data but the file holds 8"}},
      {"truncated data",
       "{" + t + "}",
       std::vector<uint8_t>(2),
       {"cover 4 bytes", "holds 2", "truncated"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto bytes = BuildSafetensors(c.header, c.data);
    auto r = ParseSafetensorsHeader(bytes, "bad.safetensors");
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().message().rfind("bad.safetensors: ", 0), 0u) << r.status().message();
    for (const char* frag : c.fragments)
      EXPECT_NE(r.status().message().find(frag), std::string::npos)
          << "\"" << r.status().message() << "\" lacks \"" << frag << "\"";
  }
}

TEST(Safetensors, HeaderLengthIsCheckedAgainstCapAndFile) {
  std::vector<std::byte> three(3);
  EXPECT_ERROR_CONTAINS(ParseSafetensorsHeader(three, "x"), "3 bytes, too short");
  EXPECT_ERROR_CONTAINS(ParseSafetensorsHeader(BuildSafetensors("{}", {}, 100'000'001), "x"),
                        "header length 100000001 exceeds the 100000000-byte limit");
  EXPECT_ERROR_CONTAINS(ParseSafetensorsHeader(BuildSafetensors("{}", {}, 64), "x"),
                        "header length 64 reaches beyond the end of the file (10 bytes)");
  EXPECT_ERROR_CONTAINS(ParseSafetensorsHeader(BuildSafetensors("{}", {}, ~uint64_t{0}), "x"),
                        "exceeds");
}

TEST(Safetensors, OpenReportsFileProblemsWithThePath) {
  TempDir dir;
  auto missing = SafetensorsFile::Open(dir / "missing.safetensors");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("missing.safetensors"), std::string::npos);
  EXPECT_ERROR_CONTAINS(SafetensorsFile::Open(dir.path()), "not a regular file");
  testing::WriteBytes(dir / "empty.safetensors", {});
  EXPECT_ERROR_CONTAINS(SafetensorsFile::Open(dir / "empty.safetensors"), "empty.safetensors",
                        "0 bytes, too short");
  testing::WriteBytes(dir / "bad.safetensors",
                      BuildSafetensors(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})",
                                       std::vector<uint8_t>(8)));
  EXPECT_ERROR_CONTAINS(SafetensorsFile::Open(dir / "bad.safetensors"), "bad.safetensors",
                        "truncated");
}

}  // namespace
}  // namespace tlaloc::io
