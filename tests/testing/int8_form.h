// Tests that pin the bits of the exact (dequantising) int8 form, or of the q8_0 composite,
// choose it for their scope: nn::SetInt8Form, back to the default when the scope ends.
#pragma once

#include "tlaloc/nn/int8_linear.h"

namespace tlaloc::testing {

class ScopedInt8Form {
 public:
  explicit ScopedInt8Form(nn::Int8Form form) { nn::SetInt8Form(form); }
  ~ScopedInt8Form() { nn::SetInt8Form(std::nullopt); }
  ScopedInt8Form(const ScopedInt8Form&) = delete;
  ScopedInt8Form& operator=(const ScopedInt8Form&) = delete;
};

}  // namespace tlaloc::testing
