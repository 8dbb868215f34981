// The HTTP routes over the scheduler. Every answer is JSON (errors OpenAI-shaped) except the
// chat page, /metrics and the event streams.
#include "tlaloc/serve/server.h"

#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <sstream>
#include <string_view>

#include "tlaloc/serve/openai_api.h"

namespace tlaloc::serve {

namespace {

using nlohmann::json;

// How often a reply with nothing new writes a probe (an SSE comment) or, for a non-streamed
// reply, looks whether its client left: cpp-httplib 0.11 reports a closed connection only when
// a write fails, and the second write after the peer closed does, so a streaming client that
// left frees its slot within two probes.
constexpr int kProbeMs = 100;

// The socket a request came on. cpp-httplib 0.11 hands a handler no socket (newer versions
// have Request::is_connection_closed), but the request's two addresses name one connected
// socket of this process: the one whose local and peer ends match. -1 when none matches.
int ConnectionSocket(const httplib::Request& req) {
  auto endpoint = [](const sockaddr_storage& a, socklen_t len, std::string* ip, int* port) {
    char host[NI_MAXHOST];
    if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, host, sizeof(host), nullptr, 0,
                    NI_NUMERICHOST) != 0)
      return false;
    *ip = host;
    *port = a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port)
                                    : ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
    return true;
  };
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const int fd = std::atoi(entry.path().filename().c_str());
    sockaddr_storage peer{}, local{};
    socklen_t peer_len = sizeof(peer), local_len = sizeof(local);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0)
      continue;
    std::string peer_ip, local_ip;
    int peer_port = -1, local_port = -1;
    if (endpoint(peer, peer_len, &peer_ip, &peer_port) &&
        endpoint(local, local_len, &local_ip, &local_port) && peer_port == req.remote_port &&
        local_port == req.local_port && peer_ip == req.remote_addr && local_ip == req.local_addr)
      return fd;
  }
  return -1;
}

// Whether the peer closed (or reset) the connection: a read that would return end of file.
// Bytes of a pipelined next request count as alive.
bool PeerClosed(int fd) {
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  // A full queue drains in about a second at these sizes: clients that honour the header (the
  // openai SDKs do) come back then instead of at once.
  if (e.status == 429) res.set_header("Retry-After", "1");
  res.set_content(Dump(e.Body()), "application/json");
}

// `endpoint` names the field a too-long prompt came in: chat's messages, a completion's prompt.
ApiError ErrorFor(const Status& s, Endpoint endpoint = Endpoint::kChatCompletions) {
  ApiError e;
  e.message = s.message();
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      e.status = 400;
      if (e.message.find("context holds") != std::string::npos ||
          e.message.find("no room for a reply") != std::string::npos) {
        e.code = "context_length_exceeded";
        e.param = endpoint == Endpoint::kChatCompletions ? "messages" : "prompt";
      } else if (e.message.find("prompt token id") != std::string::npos) {
        e.param = "prompt";
      } else if (e.message.rfind("logit_bias", 0) == 0) {
        e.param = "logit_bias";  // a token id outside the tokenizer's vocabulary
      }
      break;
    case StatusCode::kResourceExhausted:
      e.status = 429;
      e.type = "rate_limit_error";
      e.code = "rate_limit_exceeded";
      break;
    case StatusCode::kUnavailable:
      e.status = 503;
      e.type = "server_error";
      e.code = "shutting_down";
      break;
    default:
      e.status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

// The credentials of an "Authorization: Bearer TOKEN" header; the scheme is case-insensitive
// (RFC 9110, section 11.1), so "bearer" and "BEARER" count. Empty when the header is no bearer.
std::string BearerToken(const std::string& header) {
  static constexpr std::string_view kScheme = "bearer";
  if (header.size() <= kScheme.size() || header[kScheme.size()] != ' ') return "";
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return "";
  const size_t start = header.find_first_not_of(' ', kScheme.size());
  return start == std::string::npos ? "" : header.substr(start);
}

std::string Hex(int64_t v) {
  std::ostringstream os;
  os << std::hex << v;
  return os.str();
}

// State a streamed or waited-for reply carries from the handler into its content provider.
struct Reply {
  ApiRequest request;
  std::shared_ptr<RequestStream> stream;
  std::string id, model;
  int64_t created = 0;
  std::vector<StreamEvent> events;  // non-streamed: everything, for the logprobs
  std::vector<bool> first;          // per choice: its role chunk is still to come
  ToolCallStreamer tool_calls;      // streamed chat with tools: splits calls out of the content
};

bool WriteEvent(httplib::DataSink& sink, const json& j) {
  const std::string text = "data: " + Dump(j) + "\n\n";
  return sink.write(text.data(), text.size());
}

// Server-sent events: one chunk per event, the finish chunk, usage if asked, [DONE]. With tools,
// the content goes through the tool-call streamer first: text as content deltas, each call as
// one tool_calls delta when its block closes.
bool StreamProvider(Reply& r, httplib::DataSink& sink) {
  bool ok = true;
  auto send_event = [&](const StreamEvent& e) {
    auto chunk = StreamChunk(r.request, r.id, r.created, r.model, e, r.first[e.choice]);
    if (!chunk || !ok) return;
    r.first[e.choice] = false;
    ok = WriteEvent(sink, *chunk);
  };
  // Sends `items` (text and calls); `base` carries the event's reasoning and logprobs.
  auto send_items = [&](const std::vector<ToolCallStreamer::Item>& items, StreamEvent base) {
    const size_t called =
        r.tool_calls.calls_sent() -
        std::count_if(items.begin(), items.end(), [](auto& i) { return i.is_call; });
    size_t index = called;
    for (const auto& item : items) {
      if (item.is_call) {
        send_event(base);  // the role chunk, and what the event carried besides content
        base = {};
        if (ok)
          ok = WriteEvent(sink,
                          ToolCallChunk(r.request, r.id, r.created, r.model, index++, item.call));
      } else {
        base.content = item.text;
        send_event(base);
        base = {};
      }
    }
    send_event(base);
  };
  std::vector<StreamEvent> events;
  for (;;) {
    events.clear();
    const bool more = r.stream->Wait(events, kProbeMs);
    for (const StreamEvent& e : events) {
      if (r.request.parse_tool_calls) {
        StreamEvent base = e;
        base.content.clear();
        send_items(r.tool_calls.Feed(TestReply() ? std::string() : e.content), std::move(base));
      } else {
        send_event(e);
      }
      if (!ok) break;
    }
    if (!ok) {
      r.stream->Cancel();
      return false;
    }
    if (!more) break;
    if (events.empty() && !sink.write(": \n\n", 4)) {
      r.stream->Cancel();
      return false;
    }
  }
  if (r.stream->finish_reason() == generate::FinishReason::kError) {
    ApiError e = ErrorFor(r.stream->error());
    e.status = 500;
    e.type = "server_error";
    WriteEvent(sink, e.Body());
  } else {
    if (r.request.parse_tool_calls) {
      // Tests: the replacing reply, in small deltas that cut its markers.
      if (const auto& reply = TestReply())
        for (size_t i = 0; i < reply->size(); i += 4)
          send_items(r.tool_calls.Feed(std::string_view(*reply).substr(i, 4)), {});
      send_items(r.tool_calls.Finish(), {});
    }
    // Each choice closes with its own finish chunk, as OpenAI streams n > 1.
    for (int64_t c = 0; c < r.stream->choices(); ++c) {
      if (r.first[c]) {
        StreamEvent empty;
        empty.choice = c;
        send_event(empty);
      }
      const std::string finish =
          FinishReason(r.request.parse_tool_calls && TestReply()
                           ? "stop"
                           : std::string(generate::FinishReasonName(r.stream->finish_reason(c))),
                       r.tool_calls.calls_sent() > 0);
      WriteEvent(sink, FinishChunk(r.request, r.id, r.created, r.model, finish, c));
    }
    if (r.request.include_usage)
      WriteEvent(sink, UsageChunk(r.request, r.id, r.created, r.model, *r.stream));
  }
  static constexpr char kDone[] = "data: [DONE]\n\n";
  sink.write(kDone, sizeof(kDone) - 1);
  sink.done();
  return true;
}

// Debian's cpp-httplib is a compiled library whose listen() backlog is 5: a burst of clients
// (tests/cli/serve_load.py connects 16 at once) overflows the accept queue, and the kernel then
// drops handshakes or answers with SYN cookies that can end in "Connection reset by peer".
// httplib does not expose its socket, so this finds the process's listening socket on `port`
// and calls listen() again, which on Linux sets the new backlog (capped by net.core.somaxconn).
// Best effort: if nothing is found, the server still works with the small queue.
void WidenListenBacklog(int port) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    const int fd = std::atoi(it->path().filename().c_str());
    int listening = 0;
    socklen_t len = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0) continue;
    int bound = -1;
    if (addr.ss_family == AF_INET) bound = ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
    if (addr.ss_family == AF_INET6)
      bound = ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
    if (bound == port) ::listen(fd, SOMAXCONN);
  }
}

}  // namespace

Server::Server(generate::TextGenerator& text, Scheduler& scheduler, ServerOptions options)
    : text_(text),
      scheduler_(scheduler),
      options_(std::move(options)),
      http_(std::make_unique<httplib::Server>()),
      created_(static_cast<int64_t>(std::time(nullptr))) {
  const int threads = std::max(4, options_.threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_keep_alive_timeout(1);  // idle keep-alive connections do not hold up shutdown
  http_->set_read_timeout(10, 0);
  Routes();
}

Server::~Server() = default;

StatusOr<int> Server::Bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) port = 0;
  } else if (!http_->bind_to_port(options_.host, port)) {
    port = 0;
  }
  if (port <= 0)
    return Status(StatusCode::kUnavailable,
                  "cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                      " (address in use, or not an address of this machine)");
  WidenListenBacklog(port);
  return port;
}

void Server::Serve() {
  // A client that went away must fail a write, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  http_->listen_after_bind();
}

void Server::Shutdown() {
  if (draining_.exchange(true)) return;
  scheduler_.Drain();
  http_->stop();
}

std::string Server::AllowedOrigin(const std::string& origin) const {
  if (origin.empty()) return "";
  for (const std::string& o : options_.cors_origins) {
    if (o == "*") return "*";
    if (o == origin) return origin;
  }
  return "";
}

void Server::CountStatus(int status) {
  std::lock_guard<std::mutex> lock(status_mu_);
  ++responses_by_status_[status];
}

void Server::Routes() {
  httplib::Server& s = *http_;
  s.set_logger(
      [this](const httplib::Request&, const httplib::Response& res) { CountStatus(res.status); });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    ApiError e;
    e.status = res.status;
    e.message = res.status == 404
                    ? "no route " + req.method + " " + req.path
                    : "the request could not be served (HTTP " + std::to_string(res.status) + ")";
    if (res.status == 413) e.message = "the request body is too large";
    SendError(res, e);
  });
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        ApiError e;
        e.status = 500;
        e.type = "server_error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& ex) {
          e.message = std::string("internal error: ") + ex.what();
        } catch (...) {
          e.message = "internal error";
        }
        SendError(res, e);
      });
  // The key guards /v1/ only: the page, /health and /metrics stay open to the local operator.
  // CORS comes first: a browser's preflight carries no key, and an error a page cannot read
  // (no Access-Control-Allow-Origin) is no error to it.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const std::string origin = AllowedOrigin(req.get_header_value("Origin"));
    if (!origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", origin);
      if (origin != "*") res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS") {
        res.status = 204;
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        const std::string asked = req.get_header_value("Access-Control-Request-Headers");
        res.set_header("Access-Control-Allow-Headers",
                       asked.empty() ? "Authorization, Content-Type" : asked);
        res.set_header("Access-Control-Max-Age", "600");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (options_.api_key.empty() || req.path.rfind("/v1/", 0) != 0)
      return httplib::Server::HandlerResponse::Unhandled;
    if (BearerToken(req.get_header_value("Authorization")) == options_.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    e.status = 401;
    e.code = "invalid_api_key";
    e.message = "missing or wrong API key: send \"Authorization: Bearer KEY\"";
    SendError(res, e);
    return httplib::Server::HandlerResponse::Handled;
  });

  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(ChatPageHtml()), "text/html; charset=utf-8");
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const bool draining = draining_.load() || scheduler_.draining();
    res.status = draining ? 503 : 200;
    res.set_content(Dump({{"status", draining ? "draining" : "ok"}}), "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(MetricsText(), "text/plain; version=0.0.4");
  });
  auto model_object = [this] {
    return json{{"id", options_.model_name},
                {"object", "model"},
                {"created", created_},
                {"owned_by", "tlaloc"},
                {"max_model_len", scheduler_.options().max_context}};
  };
  s.Get("/v1/models", [model_object](const httplib::Request&, httplib::Response& res) {
    res.set_content(Dump({{"object", "list"}, {"data", json::array({model_object()})}}),
                    "application/json");
  });
  // One model's object (the openai SDKs' models.retrieve); ids may hold slashes.
  s.Get(R"(/v1/models/(.+))",
        [this, model_object](const httplib::Request& req, httplib::Response& res) {
          ApiRequest asked;
          asked.model = req.matches[1];
          if (auto e = CheckModel(asked, options_.model_name)) return SendError(res, *e);
          res.set_content(Dump(model_object()), "application/json");
        });
  auto complete = [this](Endpoint endpoint) {
    return [this, endpoint](const httplib::Request& req, httplib::Response& res) {
      if (draining_.load() || scheduler_.draining())
        return SendError(res,
                         ErrorFor(Status(StatusCode::kUnavailable, "the server is shutting down")));
      auto reply = std::make_shared<Reply>();
      if (auto e = ParseApiRequest(endpoint, req.body, &reply->request)) return SendError(res, *e);
      if (auto e = CheckModel(reply->request, options_.model_name)) return SendError(res, *e);
      const ApiRequest& api = reply->request;
      if (api.n > scheduler_.options().max_batch) {
        ApiError e;
        e.message = "'n' is " + std::to_string(api.n) + ": expected at most " +
                    std::to_string(scheduler_.options().max_batch) +
                    " (each choice takes one of the server's --max-batch slots)";
        e.param = "n";
        return SendError(res, e);
      }
      generate::TextRequest text_request = ToTextRequest(api, scheduler_.options().max_context);
      // A conversation that does not fit the context at all loses its oldest turns rather than
      // getting a 400 (docs/SERVING.md): reserve 1 drops nothing from one that fits.
      text_request.drop_old_turns = true;
      text_request.reply_reserve = 1;
      const SamplingDefaults& d = options_.sampling_defaults;
      if (!text_request.repetition_penalty) text_request.repetition_penalty = d.repetition_penalty;
      if (!text_request.presence_penalty) text_request.presence_penalty = d.presence_penalty;
      if (!text_request.frequency_penalty) text_request.frequency_penalty = d.frequency_penalty;
      if (!text_request.min_p) text_request.min_p = d.min_p;
      if (text_request.logit_bias.empty()) text_request.logit_bias = d.logit_bias;
      auto prepared = text_.Prepare(text_request);
      if (!prepared.ok()) return SendError(res, ErrorFor(prepared.status(), endpoint));
      if (prepared->dropped_turns > 0)
        res.set_header("X-Tlaloc-Dropped-Turns", std::to_string(prepared->dropped_turns));
      ScheduledRequest sr;
      sr.prepared = std::move(*prepared);
      sr.stop = api.stop;
      sr.split_reasoning = endpoint == Endpoint::kChatCompletions;
      sr.top_logprobs = api.top_logprobs;
      sr.n = api.n;
      auto stream = scheduler_.Submit(std::move(sr));
      if (!stream.ok()) return SendError(res, ErrorFor(stream.status(), endpoint));
      reply->stream = std::move(*stream);
      reply->first.assign(api.n, true);
      reply->id = std::string(endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-") +
                  Hex(next_id_.fetch_add(1));
      reply->model = options_.model_name;
      reply->created = static_cast<int64_t>(std::time(nullptr));
      if (api.stream) {
        // A reply that never started (the connection failed first) frees its slot too.
        auto release = [reply](bool) { reply->stream->Cancel(); };
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [reply](size_t, httplib::DataSink& sink) { return StreamProvider(*reply, sink); },
            release);
      } else {
        // The status goes out with the answer, so that a request failing after admission is
        // an error to the client, not a 200 with an error body.
        const int fd = ConnectionSocket(req);
        while (reply->stream->Wait(reply->events, kProbeMs)) {
          if (fd >= 0 && PeerClosed(fd)) {
            reply->stream->Cancel();
            res.status = 499;  // nginx's "client closed request": nobody reads it
            return;
          }
        }
        if (reply->stream->finish_reason() == generate::FinishReason::kError) {
          ApiError e = ErrorFor(reply->stream->error(), endpoint);
          e.status = 500;
          e.type = "server_error";
          return SendError(res, e);
        }
        res.set_content(Dump(CompletionBody(api, reply->id, reply->created, reply->model,
                                            *reply->stream, reply->events)) +
                            "\n",
                        "application/json");
      }
    };
  };
  s.Post("/v1/chat/completions", complete(Endpoint::kChatCompletions));
  s.Post("/v1/completions", complete(Endpoint::kCompletions));
}

std::string Server::MetricsText() const {
  const SchedulerStats st = scheduler_.Stats();
  std::ostringstream os;
  auto metric = [&](const char* name, const char* type, const char* help) {
    os << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  };
  metric("tlaloc_requests_total", "counter", "Completion requests by outcome.");
  const std::pair<const char*, int64_t> outcomes[] = {{"stop", st.requests_stop},
                                                      {"length", st.requests_length},
                                                      {"cancelled", st.requests_cancelled},
                                                      {"error", st.requests_error},
                                                      {"rejected", st.requests_rejected}};
  for (const auto& [name, n] : outcomes)
    os << "tlaloc_requests_total{outcome=\"" << name << "\"} " << n << '\n';
  metric("tlaloc_http_responses_total", "counter", "HTTP responses by status.");
  {
    std::lock_guard<std::mutex> lock(status_mu_);
    for (const auto& [status, n] : responses_by_status_)
      os << "tlaloc_http_responses_total{status=\"" << status << "\"} " << n << '\n';
  }
  // Single-value series, one row each: name, type, help, value.
  struct Series {
    const char* name;
    const char* type;
    const char* help;
    double value;
  };
  const double occupancy = st.max_batch > 0 ? static_cast<double>(st.running) / st.max_batch : 0.0;
  const Series series[] = {
      {"tlaloc_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
       static_cast<double>(st.prompt_tokens)},
      {"tlaloc_generation_tokens_total", "counter", "Tokens generated.",
       static_cast<double>(st.generated_tokens)},
      {"tlaloc_requests_running", "gauge", "Requests holding a KV slot.",
       static_cast<double>(st.running)},
      {"tlaloc_requests_waiting", "gauge", "Requests queued for a slot.",
       static_cast<double>(st.waiting)},
      {"tlaloc_batch_occupancy", "gauge", "Running requests over the batch size (0..1).",
       occupancy},
      {"tlaloc_decode_steps_total", "counter", "Decode steps run.",
       static_cast<double>(st.decode_steps)},
      {"tlaloc_decode_rows_total", "counter",
       "Request rows over all decode steps (rows / steps is the mean batch).",
       static_cast<double>(st.decode_rows)},
      {"tlaloc_prefill_chunks_total", "counter", "Prefill chunks run.",
       static_cast<double>(st.prefill_chunks)},
      {"tlaloc_kv_slots_in_use", "gauge", "KV cache slots held by requests.",
       static_cast<double>(st.kv_slots_in_use)},
      {"tlaloc_kv_slots_total", "gauge", "KV cache slots.", static_cast<double>(st.max_batch)},
      {"tlaloc_kv_tokens_in_use", "gauge", "KV cache positions holding live tokens.",
       static_cast<double>(st.kv_tokens_in_use)},
      {"tlaloc_kv_tokens_capacity", "gauge", "KV cache positions (blocks x block size).",
       static_cast<double>(st.kv_blocks_total * st.kv_block_size)},
      {"tlaloc_kv_blocks_in_use", "gauge", "KV cache blocks holding live tokens.",
       static_cast<double>(st.kv_blocks_in_use)},
      {"tlaloc_kv_blocks_reserved", "gauge",
       "KV cache blocks promised to running requests' prompts and budgets.",
       static_cast<double>(st.kv_blocks_reserved)},
      {"tlaloc_requests_running_peak", "gauge",
       "Most requests that held a KV slot at once since the server started.",
       static_cast<double>(st.peak_running)},
      {"tlaloc_kv_blocks_in_use_peak", "gauge",
       "Most KV cache blocks that held live tokens at once since the server started.",
       static_cast<double>(st.peak_kv_blocks_in_use)},
      {"tlaloc_kv_blocks_reserved_peak", "gauge",
       "Most KV cache blocks promised to running requests at once since the server started.",
       static_cast<double>(st.peak_kv_blocks_reserved)},
      {"tlaloc_kv_blocks_total", "gauge", "KV cache blocks in the pool.",
       static_cast<double>(st.kv_blocks_total)},
      {"tlaloc_kv_block_positions", "gauge", "Positions per KV cache block.",
       static_cast<double>(st.kv_block_size)},
      {"tlaloc_kv_block_bytes", "gauge", "Bytes per KV cache block (every layer, K and V).",
       static_cast<double>(st.kv_block_bytes)},
  };
  // 15 significant digits print every counter below 10^15 exactly, not as 1.2e+06.
  os << std::setprecision(15);
  for (const Series& s : series) {
    metric(s.name, s.type, s.help);
    os << s.name << ' ' << s.value << '\n';
  }
  auto histogram = [&](const char* name, const char* help, const std::vector<int64_t>& counts,
                       double sum, int64_t total) {
    metric(name, "histogram", help);
    for (size_t i = 0; i < st.latency_bounds.size(); ++i)
      os << name << "_bucket{le=\"" << st.latency_bounds[i] << "\"} " << counts[i] << '\n';
    os << name << "_bucket{le=\"+Inf\"} " << total << '\n';
    os << name << "_sum " << sum << '\n' << name << "_count " << total << '\n';
  };
  histogram("tlaloc_time_to_first_token_seconds", "Submission to first token.", st.ttft_counts,
            st.ttft_sum, st.ttft_total);
  histogram("tlaloc_request_duration_seconds", "Submission to finish.", st.duration_counts,
            st.duration_sum, st.duration_total);
  return os.str();
}

}  // namespace tlaloc::serve
