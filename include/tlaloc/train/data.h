// Fine-tuning data: JSONL rows of {"text": ...} or chat {"messages": [{"role", "content"}...]}
// turned into token documents, then shuffled and packed into [batch, seq_len] rows of inputs
// and next-token labels.
//
// A document is its tokens followed by the end-of-text token. Text rows train on every token;
// chat rows are rendered with the model's own chat template and train only on assistant turns,
// so labels elsewhere are kIgnoreLabel. A turn is found through the template, with no model's
// markers built in: it is what rendering messages[:i+1] adds to rendering messages[:i] with the
// generation prompt (as the turn appears in the whole conversation, which for Qwen3 drops the
// reasoning of earlier turns), less the whitespace that separates it from the next turn. For
// Qwen3 that is the reply and its closing <|im_end|>.
//
// Packing: each epoch visits the documents in a seeded random order. Whole documents are placed
// one after another in a row while they fit; the rest of the row is padding (ignored labels).
// A document longer than a row is cut into row-sized pieces whose labels continue across the
// cut. The label of a document's last token (its end-of-text) is ignored, so nothing learns to
// predict an unrelated next document. The stream never ends: epochs follow each other.
//
// Packed documents train as if each were alone in its row: the trainer, given the end-of-text
// id (TrainOptions::document_end_id, which RunFinetune sets), lets a token attend only to the
// earlier tokens of its own document and restarts rotary positions at 0 after every
// end-of-text (train/packed_positions.h). A document cut across rows continues at position 0
// of the next row, seeing only its piece there; each padding token is a document of its own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/support/status.h"
#include "tlaloc/tokenizer/chat.h"
#include "tlaloc/tokenizer/tokenizer.h"
#include "tlaloc/train/trainer.h"  // kIgnoreLabel

namespace tlaloc::train {

struct Document {
  std::vector<int32_t> ids;
  // trained[i]: whether predicting ids[i] from the tokens before it counts in the loss.
  std::vector<uint8_t> trained;
};

struct DocumentOptions {
  // Appended to every document; also the padding token of packed rows.
  int32_t end_of_text_id = 0;
  // Renders "messages" rows (the model's own template, tokenizer/chat.h); null refuses them.
  const ChatTemplate* chat_template = nullptr;
};

// The id of `token` (a model family's document end, models::ModelFamily::document_end_token) in
// `tokenizer`; an error naming the token when the tokenizer lacks it.
StatusOr<int32_t> EndOfTextId(const Tokenizer& tokenizer, std::string_view token = "<|endoftext|>");

// One JSONL row (`line` without its newline); `where` ("file:line") starts every error message.
StatusOr<Document> DocumentFromJsonLine(std::string_view line, const std::string& where,
                                        const Tokenizer& tokenizer, const DocumentOptions& options);

// Every non-blank line of a JSONL file. An error names every bad row's file:line and what was
// wrong (the first 20, then how many more).
StatusOr<std::vector<Document>> LoadJsonlDocuments(const std::filesystem::path& path,
                                                   const Tokenizer& tokenizer,
                                                   const DocumentOptions& options);

// Row-major s32 [batch, seq_len] inputs and labels.
struct TokenBatch {
  int64_t batch = 0;
  int64_t seq_len = 0;
  std::vector<int32_t> input_ids;
  std::vector<int32_t> labels;
  // Positions whose label is trained.
  int64_t trained_tokens() const;
};

class Packer {
 public:
  // Errors when there are no documents, no trained label at all, or a size is not positive.
  static StatusOr<Packer> Create(std::vector<Document> documents, int64_t batch, int64_t seq_len,
                                 uint64_t seed, int32_t pad_id);

  // The next batch of the stream.
  TokenBatch Next();
  // Advances past `n` batches (resuming a run at its step).
  void Skip(int64_t n);

  // The epoch the next batch starts in (0-based), and batches in one pass over the data
  // (rounded up; computed once by packing epoch 0).
  int64_t epoch() const { return epoch_; }
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  size_t num_documents() const { return documents_.size(); }

 private:
  Packer() = default;
  void StartEpoch();
  // Fills one row (seq_len slots at `inputs`/`labels`) from the stream.
  void FillRow(int32_t* inputs, int32_t* labels);

  std::vector<Document> documents_;
  int64_t batch_ = 0, seq_len_ = 0;
  uint64_t seed_ = 0;
  int32_t pad_id_ = 0;
  int64_t epoch_ = 0;
  int64_t batches_per_epoch_ = 0;
  std::vector<size_t> order_;
  size_t next_doc_ = 0;    // index into order_
  size_t doc_offset_ = 0;  // first token of the current document not yet placed
};

}  // namespace tlaloc::train
