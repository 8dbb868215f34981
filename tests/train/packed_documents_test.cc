// Packed documents stay apart in training: the positions derived from end-of-text tokens
// (restarting at each document and each row, padding its own one-token documents), a
// document packed after another giving the same loss and gradients as alone in its row (and
// not so without document_end_id, so the check can fail), and the dp plan on 2 devices
// equal to one device with packing on.
//
// Tolerance: the packed and the lone document run the same arithmetic on the same values,
// but in rows of other layouts, so the interpreter may sum in another order (its attention
// adds the masked keys' exact zeros at other places): the loss and every gradient must agree
// within 1e-5 of their tensor's largest magnitude (f32 rounds at 6e-8 relative; the sums here
// run over at most 32 terms). Unmasked, the same comparison differs by more than 1e-3.
#include <gtest/gtest.h>

#include <cstdio>
#include <span>

#include "sharded_test_util.h"
#include "tlaloc/train/data.h"
#include "tlaloc/train/packed_positions.h"
#include "tlaloc/train/sharded_trainer.h"

namespace tlaloc::train {
namespace {

using namespace testing_sharded;  // NOLINT: the shared fixture's names read as local ones

constexpr int32_t kEnd = 1;  // the tiny model's end-of-text id in these tests
constexpr double kTolerance = 1e-5;

// PackedPositions of `ids` [rows, cols] run on the interpreter.
std::vector<int32_t> PositionsOf(const std::vector<int32_t>& ids, int64_t rows, int64_t cols) {
  auto module = std::make_shared<Module>("positions");
  FunctionBuilder fb(module.get(), "main");
  Tensor in = fb.AddArg(TensorType(ElementType::kS32, {rows, cols}));
  EXPECT_TRUE(fb.Return({PackedPositions(in, kEnd)}).ok());
  auto backend = MakeInterpreterBackend({}, 1);
  auto program = backend->Compile(module);
  EXPECT_TRUE(program.ok()) << program.status().ToString();
  auto out = backend->Run(**program, {Literal::FromVector<int32_t>({rows, cols}, ids)});
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  std::vector<int32_t> positions;
  for (int64_t i = 0; i < rows * cols; ++i)
    positions.push_back(static_cast<int32_t>((*out)[0].GetAsDouble(i)));
  return positions;
}

TEST(PackedPositions, RestartAfterEachEndOfTextAndAtEachRow) {
  // Row 0: a 3-token document then the start of one cut at the row's end; row 1: its rest,
  // then padding (each pad token a document of its own).
  const std::vector<int32_t> ids = {5, 6, kEnd, 7, 8, 9, 10, 11, kEnd, kEnd, kEnd, kEnd};
  EXPECT_EQ(PositionsOf(ids, 2, 6), (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 0, 0}));
}

TEST(PackedPositions, FollowThePackersDocumentsAcrossCutsAndPadding) {
  // Documents of 3, 5 and 11 tokens (end-of-text included) in rows of 6: the long one is cut
  // across rows and the rows end in padding.
  std::vector<Document> docs;
  for (int size : {3, 5, 11}) {
    Document d;
    for (int i = 0; i + 1 < size; ++i) d.ids.push_back(10 + i);
    d.ids.push_back(kEnd);
    d.trained.assign(d.ids.size(), 1);
    docs.push_back(d);
  }
  constexpr int64_t kRows = 4, kCols = 6;
  auto packer = Packer::Create(docs, kRows, kCols, /*seed=*/3, /*pad_id=*/kEnd);
  ASSERT_TRUE(packer.ok()) << packer.status().ToString();
  const TokenBatch batch = packer->Next();
  const std::vector<int32_t> positions = PositionsOf(batch.input_ids, kRows, kCols);
  bool cut = false, padded = false;
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t t = 0; t < kCols; ++t) {
      const int64_t i = r * kCols + t;
      // Each row starts a document; every token after an end-of-text starts one.
      const int32_t expected = t == 0 || batch.input_ids[i - 1] == kEnd ? 0 : positions[i - 1] + 1;
      EXPECT_EQ(positions[i], expected) << "row " << r << " column " << t;
    }
    // A row ending inside a document (not on its end-of-text) continues it in the next row.
    cut = cut || batch.input_ids[r * kCols + kCols - 1] != kEnd;
    padded = padded || (batch.input_ids[r * kCols + kCols - 1] == kEnd &&
                        batch.input_ids[r * kCols + kCols - 2] == kEnd);
  }
  EXPECT_TRUE(cut) << "the batch should cut the 11-token document";
  EXPECT_TRUE(padded) << "the batch should end a row in padding";
}

// Loss, token count and every gradient of one [1, kSeq] row.
StatusOr<std::vector<Literal>> LossAndGrads(const io::ModelConfig& c, const TrainOptions& options,
                                            const std::vector<int32_t>& ids,
                                            const std::vector<int32_t>& labels) {
  auto one = MakeInterpreterBackend({}, 1);
  TL_ASSIGN_OR_RETURN(std::shared_ptr<Module> module, BuildLossAndGradProgram(c, options, 1, kSeq));
  TL_ASSIGN_OR_RETURN(auto program, one->Compile(module));
  std::vector<Literal> args = Weights(c);
  args.push_back(Literal::FromVector<int32_t>({1, kSeq}, ids));
  args.push_back(Literal::FromVector<int32_t>({1, kSeq}, labels));
  return one->Run(*program, args);
}

// The largest relative difference of the loss and the gradients of two LossAndGrads results.
double WorstDiff(const std::vector<Literal>& a, const std::vector<Literal>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (i != 1) worst = std::max(worst, RelativeDiff(a[i], b[i]));
  return worst;
}

TEST(PackedDocuments, SecondDocumentTrainsAsIfAloneInItsRow) {
  const io::ModelConfig c = TinyConfig();
  static_assert(kSeq == 8);
  const int32_t i = kIgnoreLabel;
  // Document one [20 21 22 end], unlabelled, then document two [30 31 32 end]; alone, document
  // two starts the row and padding follows. Labels: document two's next tokens either way.
  const std::vector<int32_t> packed = {20, 21, 22, kEnd, 30, 31, 32, kEnd};
  const std::vector<int32_t> packed_labels = {i, i, i, i, 31, 32, kEnd, i};
  const std::vector<int32_t> alone = {30, 31, 32, kEnd, kEnd, kEnd, kEnd, kEnd};
  const std::vector<int32_t> alone_labels = {31, 32, kEnd, i, i, i, i, i};
  TrainOptions options = Options();
  options.document_end_id = kEnd;
  auto a = LossAndGrads(c, options, packed, packed_labels);
  auto b = LossAndGrads(c, options, alone, alone_labels);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*a)[1].GetAsDouble(0), 3);
  EXPECT_EQ((*b)[1].GetAsDouble(0), 3);
  const double packed_diff = WorstDiff(*a, *b);
  EXPECT_LE(packed_diff, kTolerance);

  // Without document boundaries document two sees document one and continues its positions.
  auto unmasked = LossAndGrads(c, Options(), packed, packed_labels);
  ASSERT_TRUE(unmasked.ok()) << unmasked.status().ToString();
  const double unmasked_diff = WorstDiff(*unmasked, *b);
  EXPECT_GT(unmasked_diff, 1e-3);
  std::printf("packed vs alone: largest diff %.3g with document_end_id, %.3g without\n",
              packed_diff, unmasked_diff);
}

TEST(PackedDocuments, DataParallelStepEqualsOneDevice) {
  const io::ModelConfig c = TinyConfig();
  Batch batch = MakeBatch(c, 4);
  // End documents inside rows, so rows hold several documents.
  std::span<int32_t> ids = batch.input_ids.span<int32_t>();
  for (size_t k = 2; k < ids.size(); k += 3) ids[k] = kEnd;
  TrainOptions options = Options();
  options.document_end_id = kEnd;
  auto ref = UnshardedLossAndGradients(c, batch, options);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto unmasked = UnshardedLossAndGradients(c, batch);
  ASSERT_TRUE(unmasked.ok()) << unmasked.status().ToString();
  EXPECT_GT(WorstDiff(*unmasked, *ref), 1e-3) << "the batch should pack documents";

  auto mesh = Mesh::Parse("data=2");
  ASSERT_TRUE(mesh.ok());
  auto plan = shard::ShardingPlan::Make("dp", *mesh, c, kBatch);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  auto backend = MakeInterpreterBackend({}, 2);
  auto trainer = ShardedTrainer::Create(c, Weights(c), options, *backend, *plan, kSeq);
  ASSERT_TRUE(trainer.ok()) << trainer.status().ToString();
  auto got = (*trainer)->LossAndGrad(batch);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->tokens, (*ref)[1].GetAsDouble(0));
  const double ref_loss = (*ref)[0].GetAsDouble(0);
  EXPECT_LE(std::fabs(got->loss - ref_loss) / std::fabs(ref_loss), kTolerance);
  ASSERT_EQ(got->grads.size() + 2, ref->size());
  for (size_t k = 0; k < got->grads.size(); ++k)
    EXPECT_LE(RelativeDiff(got->grads[k], (*ref)[2 + k]), kTolerance) << plan->weights()[k].name;
}

}  // namespace
}  // namespace tlaloc::train
