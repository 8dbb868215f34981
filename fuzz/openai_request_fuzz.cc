// libFuzzer target for the server's request bodies (serve/openai_api.h): the first byte picks
// the endpoint (even: /v1/chat/completions, odd: /v1/completions), the rest is the body. A body
// must be refused with a 4xx error that names what was wrong, or accepted with every field in
// its documented range; an accepted request's answers must build and print.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "tlaloc/serve/openai_api.h"

namespace {

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "openai_request_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tlaloc::serve;
  if (size == 0) return 0;
  const Endpoint endpoint = data[0] % 2 ? Endpoint::kCompletions : Endpoint::kChatCompletions;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  ApiRequest r;
  if (auto e = ParseApiRequest(endpoint, body, &r)) {
    if (e->status < 400 || e->status >= 500) Fail("a refusal without a 4xx status");
    if (e->message.empty()) Fail("a refusal without a message");
    (void)Dump(e->Body());
    return 0;
  }
  if (endpoint == Endpoint::kChatCompletions && r.messages.empty()) Fail("chat without messages");
  if (endpoint == Endpoint::kCompletions && r.prompt.empty()) Fail("completion without prompt");
  if (r.max_tokens && *r.max_tokens < 1) Fail("max_tokens below 1");
  if (r.temperature && !(*r.temperature >= 0 && *r.temperature <= 2)) Fail("temperature range");
  if (r.top_p && !(*r.top_p > 0 && *r.top_p <= 1)) Fail("top_p range");
  if (r.top_k && *r.top_k < 0) Fail("negative top_k");
  if (r.top_logprobs < -1 || r.top_logprobs > 20) Fail("top_logprobs range");
  for (const auto& s : r.stop)
    if (s.empty()) Fail("an empty stop string");
  (void)ToTextRequest(r, 64);
  RequestStream done;
  StreamEvent event;
  event.content = r.prompt.substr(0, 8);
  (void)Dump(CompletionBody(r, "id", 0, "m", done, {event}));
  if (auto chunk = StreamChunk(r, "id", 0, "m", event, true)) (void)Dump(*chunk);
  (void)Dump(FinishChunk(r, "id", 0, "m", "stop"));
  (void)Dump(UsageChunk(r, "id", 0, "m", done));
  return 0;
}
