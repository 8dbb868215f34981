// What the engine tests share: an f32 engine over a tiny reference model with its slots reserved,
// and a request (a prompt and its row's sampling settings).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "models/qwen3_reference.h"
#include "tlaloc/generate/engine.h"

namespace tlaloc::testing {

inline std::unique_ptr<generate::Engine> MakeTestEngine(const RefModel& m, int64_t slots,
                                                        int64_t max_len) {
  auto e = generate::Engine::Create(m.config, m.literals, ElementType::kF32);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (!e.ok()) return nullptr;
  Status s = (*e)->Reserve(slots, max_len);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::move(*e);
}

struct EngineRequest {
  std::vector<int32_t> prompt;
  generate::RowSampling sampling;
};

}  // namespace tlaloc::testing
