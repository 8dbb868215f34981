#include "regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tlaloc/tokenizer/utf8.h"

namespace tlaloc::tokenizer_internal {

namespace {

// Per-thread match state: the JIT stack default (32 KiB) is too small for long runs of
// whitespace or punctuation in patterns with lookahead, so give it room to grow to 8 MiB.
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && stack) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

ThreadMatchState& MatchState() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

StatusOr<std::unique_ptr<RegexSplitter>> RegexSplitter::Compile(const std::string& pattern,
                                                                bool literal) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   options, &error, &offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return InvalidArgument("regex /" + pattern + "/ does not compile at offset " +
                           std::to_string(offset) + ": " + reinterpret_cast<char*>(message));
  }
  std::unique_ptr<RegexSplitter> splitter(new RegexSplitter());
  splitter->code_ = code;
  // JIT is an optimisation only; the interpreter gives the same matches where JIT is unavailable.
  splitter->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return splitter;
}

RegexSplitter::~RegexSplitter() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void RegexSplitter::Split(std::string_view text, std::vector<std::string_view>* out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  ThreadMatchState& state = MatchState();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t gap = 0, offset = 0;
  while (offset < text.size()) {
    // Input is well-formed already (the tokenizer repairs it), so skip PCRE2's UTF check.
    int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK,
                                    state.data, state.context)
                  : pcre2_match(code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, state.data,
                                state.context);
    if (rc < 0) break;  // no match (or a resource limit): the rest is one gap piece
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
    size_t begin = ov[0], end = ov[1];
    if (begin > gap) out->push_back(text.substr(gap, begin - gap));
    if (end > begin) {
      out->push_back(text.substr(begin, end - begin));
      offset = end;
    } else {
      // An empty match: step over one code point, as JavaScript's matchAll does with /u.
      size_t pos = begin;
      if (pos < text.size()) utf8::Next(text, &pos);
      offset = pos;
    }
    gap = end;
  }
  if (gap < text.size()) out->push_back(text.substr(gap));
}

}  // namespace tlaloc::tokenizer_internal
