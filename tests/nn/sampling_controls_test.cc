// The sampling controls past temperature/top-k/top-p (logit_bias, repetition, presence and
// frequency penalties, min_p): on a small vocabulary the penalised logits and the final
// distribution equal transformers' logits processors (tests/nn/logits_processors_oracle.py)
// within 1e-6, a draw with the controls is the draw of the processed distribution for the same
// key, and a batch with different settings per row gives every row what it gives alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <vector>

#include "testing/oracle.h"
#include "tlaloc/interp/interpreter.h"
#include "tlaloc/nn/sampling.h"

namespace tlaloc::nn {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kVocab = 48;

struct Row {
  std::vector<float> logits;
  std::vector<int32_t> prompt, generated;
  SamplingParams params;
  uint64_t seed = 0;
  uint32_t step = 0;
};

struct Outputs {
  std::vector<float> penalized, probs;
  std::vector<int32_t> tokens;
};

// One program over `rows`: the penalised logits, the distribution after temperature and min_p,
// and SampleRows' draw (all candidates) from the penalised logits with each row's settings.
Outputs RunRows(const std::vector<Row>& rows) {
  const int64_t n = static_cast<int64_t>(rows.size());
  Module module("t");
  FunctionBuilder fb(&module, "main");
  const TensorType dense(ElementType::kF32, {n, kVocab});
  Tensor logits = fb.AddArg(dense);
  RowPenaltyInputs pen{fb.AddArg(dense), fb.AddArg(dense), fb.AddArg(dense)};
  RowSamplingInputs in;
  in.temperature = fb.AddArg(TensorType(ElementType::kF32, {n}));
  in.top_k = fb.AddArg(TensorType(ElementType::kS32, {n}));
  in.top_p = fb.AddArg(TensorType(ElementType::kF32, {n}));
  in.keys = fb.AddArg(TensorType(ElementType::kU32, {n, 2}));
  in.steps = fb.AddArg(TensorType(ElementType::kU32, {n}));
  in.min_p = fb.AddArg(TensorType(ElementType::kF32, {n}));
  Tensor penalized = PenalizeLogits(logits, pen);
  Tensor t = Where(Gt(in.temperature, FullLike(in.temperature, 0.0)), in.temperature,
                   FullLike(in.temperature, 1.0));
  Tensor probs = Softmax(ApplyMinP(penalized / ExpandDims(t, 1), in.min_p), -1);
  Tensor tokens = SampleRows(penalized, in, kVocab);
  Status built = fb.Return({penalized, probs, tokens});
  EXPECT_TRUE(built.ok()) << built.ToString();
  if (!built.ok()) return {};
  std::vector<float> flat, bias(n * kVocab), scale(n * kVocab), offset(n * kVocab), temp, top_p,
      min_p;
  std::vector<int32_t> top_k;
  std::vector<uint32_t> keys, steps;
  for (int64_t r = 0; r < n; ++r) {
    const Row& row = rows[r];
    flat.insert(flat.end(), row.logits.begin(), row.logits.end());
    FillPenaltyRow(row.params, row.prompt, row.generated,
                   std::span<float>(bias).subspan(r * kVocab, kVocab),
                   std::span<float>(scale).subspan(r * kVocab, kVocab),
                   std::span<float>(offset).subspan(r * kVocab, kVocab));
    temp.push_back(static_cast<float>(row.params.temperature));
    top_k.push_back(static_cast<int32_t>(row.params.top_k));
    top_p.push_back(static_cast<float>(row.params.top_p));
    min_p.push_back(static_cast<float>(row.params.min_p));
    keys.push_back(static_cast<uint32_t>(row.seed >> 32));
    keys.push_back(static_cast<uint32_t>(row.seed));
    steps.push_back(row.step);
  }
  auto out = Interpret(
      module, "main",
      {Literal::FromVector<float>({n, kVocab}, flat), Literal::FromVector<float>({n, kVocab}, bias),
       Literal::FromVector<float>({n, kVocab}, scale),
       Literal::FromVector<float>({n, kVocab}, offset), Literal::FromVector<float>({n}, temp),
       Literal::FromVector<int32_t>({n}, top_k), Literal::FromVector<float>({n}, top_p),
       Literal::FromVector<uint32_t>({n, 2}, keys), Literal::FromVector<uint32_t>({n}, steps),
       Literal::FromVector<float>({n}, min_p)});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  if (!out.ok()) return {};
  Outputs o;
  auto p0 = (*out)[0].span<float>(), p1 = (*out)[1].span<float>();
  auto p2 = (*out)[2].span<int32_t>();
  o.penalized.assign(p0.begin(), p0.end());
  o.probs.assign(p1.begin(), p1.end());
  o.tokens.assign(p2.begin(), p2.end());
  return o;
}

// Rows exercising each control alone and together, on logits of both signs (the repetition
// penalty divides positive ones and multiplies negative ones).
std::vector<Row> MakeRows() {
  std::mt19937 rng(7);
  std::normal_distribution<float> d(0.0f, 1.5f);
  auto row = [&](SamplingParams p) {
    Row r;
    r.logits.resize(kVocab);
    for (float& x : r.logits) x = d(rng);
    r.prompt = {1, 5, 5, 9, 30};
    r.generated = {2, 5, 7, 7, 7, 40, 2};
    r.params = p;
    return r;
  };
  std::vector<Row> rows;
  SamplingParams p;
  p.temperature = 1.0;
  rows.push_back(row(p));  // no controls
  p.repetition_penalty = 1.3;
  rows.push_back(row(p));
  p = {};
  p.temperature = 0.7;
  p.presence_penalty = 0.8;
  p.frequency_penalty = 0.45;
  rows.push_back(row(p));
  p = {};
  p.temperature = 1.2;
  p.logit_bias = {{3, 4.5f}, {7, -100.f}, {11, 1.25f}};
  rows.push_back(row(p));
  p = {};
  p.temperature = 0.8;
  p.min_p = 0.15;
  rows.push_back(row(p));
  p = {};
  p.temperature = 0.9;
  p.repetition_penalty = 0.8;  // < 1 favours repeats
  p.presence_penalty = -0.5;
  p.frequency_penalty = 1.1;
  p.logit_bias = {{5, -2.f}, {20, 3.f}};
  p.min_p = 0.05;
  rows.push_back(row(p));
  return rows;
}

std::string ReadAll(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// transformers' processed logits and distribution for `rows`, or a failed test.
std::optional<nlohmann::json> Oracle(const std::vector<Row>& rows) {
  nlohmann::json j = nlohmann::json::array();
  for (const Row& r : rows) {
    nlohmann::json bias = nlohmann::json::object();
    for (const auto& [id, b] : r.params.logit_bias) bias[std::to_string(id)] = b;
    j.push_back({{"logits", r.logits},
                 {"prompt", r.prompt},
                 {"generated", r.generated},
                 {"logit_bias", bias},
                 {"repetition_penalty", r.params.repetition_penalty},
                 {"presence_penalty", r.params.presence_penalty},
                 {"frequency_penalty", r.params.frequency_penalty},
                 {"temperature", r.params.temperature},
                 {"min_p", r.params.min_p}});
  }
  const fs::path dir =
      fs::temp_directory_path() / ("tlaloc_sampling_controls_" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "rows.json");
    f << j.dump();
  }
  const fs::path script = fs::path(TLALOC_SOURCE_DIR) / "tests/nn/logits_processors_oracle.py";
  const std::string cmd = testing::OraclePython() + " '" + script.string() + "' '" +
                          (dir / "rows.json").string() + "' > '" + (dir / "out.json").string() +
                          "' 2> '" + (dir / "err.txt").string() + "'";
  const int rc = std::system(cmd.c_str());
  auto out = nlohmann::json::parse(ReadAll(dir / "out.json"), nullptr, false);
  const std::string err = ReadAll(dir / "err.txt");
  fs::remove_all(dir);
  if (rc != 0 || out.is_discarded()) {
    ADD_FAILURE() << "the oracle failed (status " << rc << "): " << cmd << "\n" << err;
    return std::nullopt;
  }
  return out;
}

TEST(SamplingControls, ProcessedLogitsAndDistributionEqualTransformers) {
  if (auto why = testing::PythonMissing("torch transformers"); !why.empty()) TL_ORACLE_MISSING(why);
  const std::vector<Row> rows = MakeRows();
  auto oracle = Oracle(rows);
  ASSERT_TRUE(oracle);
  Outputs got = RunRows(rows);
  ASSERT_EQ(got.probs.size(), rows.size() * kVocab);
  double worst_logit = 0, worst_prob = 0;
  int cut = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    auto want_logits = (*oracle)["penalized"][r].get<std::vector<double>>();
    auto want_probs = (*oracle)["probs"][r].get<std::vector<double>>();
    ASSERT_EQ(want_probs.size(), static_cast<size_t>(kVocab));
    for (int64_t v = 0; v < kVocab; ++v) {
      const double dl = std::abs(got.penalized[r * kVocab + v] - want_logits[v]);
      const double dp = std::abs(got.probs[r * kVocab + v] - want_probs[v]);
      worst_logit = std::max(worst_logit, dl);
      worst_prob = std::max(worst_prob, dp);
      EXPECT_LE(dl, 1e-6) << "row " << r << ", token " << v;
      EXPECT_LE(dp, 1e-6) << "row " << r << ", token " << v;
      cut += want_probs[v] == 0.0;
      EXPECT_EQ(got.probs[r * kVocab + v] == 0.0f, want_probs[v] == 0.0)
          << "row " << r << ", token " << v << ": cut by one and not the other";
    }
  }
  // min_p and the -100 bias cut tokens; otherwise the comparison of cuts checked nothing.
  EXPECT_GT(cut, 5);
  std::printf("max |logit diff| %.3g, max |prob diff| %.3g, %d tokens cut, transformers %s\n",
              worst_logit, worst_prob, cut, (*oracle)["transformers"].get<std::string>().c_str());
}

TEST(SamplingControls, DrawsAreThoseOfTheProcessedDistribution) {
  if (auto why = testing::PythonMissing("torch transformers"); !why.empty()) TL_ORACLE_MISSING(why);
  const std::vector<Row> rows = MakeRows();
  auto oracle = Oracle(rows);
  ASSERT_TRUE(oracle);
  int draws = 0, differ_from_argmax = 0;
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    std::vector<Row> with = rows, processed;
    for (size_t r = 0; r < rows.size(); ++r) {
      with[r].seed = seed * 1000 + r;
      with[r].step = static_cast<uint32_t>(seed);
      // The same key draws from transformers' distribution given as log-probabilities (cut
      // tokens at -1e30), with no controls and temperature 1.
      Row p;
      p.seed = with[r].seed;
      p.step = with[r].step;
      p.params.temperature = 1.0;
      for (double q : (*oracle)["probs"][r].get<std::vector<double>>())
        p.logits.push_back(q > 0 ? static_cast<float>(std::log(q)) : -1e30f);
      processed.push_back(p);
    }
    Outputs a = RunRows(with), b = RunRows(processed);
    ASSERT_EQ(a.tokens.size(), rows.size());
    ASSERT_EQ(b.tokens.size(), rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      EXPECT_EQ(a.tokens[r], b.tokens[r]) << "seed " << seed << ", row " << r;
      const auto& l = rows[r].logits;
      differ_from_argmax += a.tokens[r] != std::max_element(l.begin(), l.end()) - l.begin();
      ++draws;
    }
  }
  EXPECT_GT(differ_from_argmax, draws / 4);  // the draws were random, not all the argmax
}

TEST(SamplingControls, EachRowOfABatchGetsWhatItGetsAlone) {
  std::vector<Row> rows = MakeRows();
  // A greedy row with a bias that moves its argmax, and one with a repetition penalty.
  Row greedy = rows[0];
  greedy.params = {};
  greedy.params.logit_bias = {{17, 50.f}};
  rows.push_back(greedy);
  for (size_t r = 0; r < rows.size(); ++r) {
    rows[r].seed = 99 + 13 * r;
    rows[r].step = 4;
  }
  Outputs batch = RunRows(rows);
  ASSERT_EQ(batch.tokens.size(), rows.size());
  EXPECT_EQ(batch.tokens.back(), 17);
  for (size_t r = 0; r < rows.size(); ++r) {
    Outputs alone = RunRows({rows[r]});
    ASSERT_EQ(alone.tokens.size(), 1u);
    EXPECT_EQ(batch.tokens[r], alone.tokens[0]) << "row " << r;
    for (int64_t v = 0; v < kVocab; ++v) {
      EXPECT_EQ(batch.penalized[r * kVocab + v], alone.penalized[v]) << "row " << r;
      EXPECT_EQ(batch.probs[r * kVocab + v], alone.probs[v]) << "row " << r;
    }
  }
}

// The dense inputs follow the rules: the repetition penalty marks prompt and generated ids,
// presence/frequency count the generated ids only, biases add up per id.
TEST(SamplingControls, PenaltyRowFromHistory) {
  SamplingParams p;
  p.repetition_penalty = 1.5;
  p.presence_penalty = 0.5;
  p.frequency_penalty = 0.25;
  p.logit_bias = {{2, 1.f}, {60, 9.f}};  // 60 is outside the vocabulary: ignored
  std::vector<float> bias(8), scale(8), offset(8);
  const std::vector<int32_t> prompt{1, 3}, generated{3, 4, 4, 4};
  FillPenaltyRow(p, prompt, generated, bias, scale, offset);
  EXPECT_EQ(bias, (std::vector<float>{0, 0, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(scale, (std::vector<float>{1, 1.5f, 1, 1.5f, 1.5f, 1, 1, 1}));
  EXPECT_EQ(offset, (std::vector<float>{0, 0, 0, 0.75f, 1.25f, 0, 0, 0}));
}

}  // namespace
}  // namespace tlaloc::nn
