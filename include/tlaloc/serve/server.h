// `tlaloc serve`'s HTTP front: the OpenAI endpoints (/v1/chat/completions, /v1/completions,
// streamed as server-sent events or not, /v1/models), /health, /metrics (Prometheus text) and a
// chat page at /, over the Scheduler. HTTP is Debian's cpp-httplib: a small, maintained,
// blocking server with a thread pool and chunked responses (what SSE needs), no framework or
// event loop to adopt, and packaged for Debian 12 (libcpp-httplib-dev) so nothing is vendored.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tlaloc/generate/text_generation.h"
#include "tlaloc/serve/scheduler.h"
#include "tlaloc/support/status.h"

namespace httplib {
class Server;
}

namespace tlaloc::serve {

// Sampling controls for requests that leave them unset (tlaloc serve's --repeat-penalty,
// --presence-penalty, --frequency-penalty, --min-p and --logit-bias; a request's logit_bias
// replaces the default map whole).
struct SamplingDefaults {
  std::optional<double> repetition_penalty, presence_penalty, frequency_penalty, min_p;
  std::map<int32_t, float> logit_bias;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: an ephemeral port (Bind returns it)
  std::string api_key;                // non-empty: /v1/ requests need "Authorization: Bearer KEY"
  std::string model_name = "tlaloc";  // the id /v1/models lists and answers carry
  // Origins whose web pages may call the server (CORS: preflights answered, and
  // Access-Control-Allow-Origin on answers); "*" for any. Empty: no CORS headers at all.
  std::vector<std::string> cors_origins;
  size_t max_body_bytes = 8 << 20;
  int threads = 64;  // connections served at once (each streaming reply holds one)
  SamplingDefaults sampling_defaults;
};

// The page served at / (self-contained HTML and JavaScript).
std::string_view ChatPageHtml();

class Server {
 public:
  Server(generate::TextGenerator& text, Scheduler& scheduler, ServerOptions options);
  ~Server();
  // Binds the listening socket; returns the port (the chosen one when options.port is 0).
  StatusOr<int> Bind();
  // Serves until Shutdown; returns once the listener closed and every connection ended.
  void Serve();
  // Refuses new completions (503) from now on, waits for running and queued ones to finish,
  // then stops listening. Safe to call from any thread, once.
  void Shutdown();

  // The /metrics text.
  std::string MetricsText() const;

 private:
  void Routes();
  void CountStatus(int status);
  // The Access-Control-Allow-Origin value for a request from `origin`: "*", the origin itself,
  // or "" when it may not (or CORS is off).
  std::string AllowedOrigin(const std::string& origin) const;

  generate::TextGenerator& text_;
  Scheduler& scheduler_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> next_id_{1};
  mutable std::mutex status_mu_;
  std::map<int, int64_t> responses_by_status_;
  int64_t created_ = 0;
};

}  // namespace tlaloc::serve
