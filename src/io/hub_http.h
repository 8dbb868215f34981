// The few HTTP requests the Hub download makes, through libcurl: one request, its status, the
// headers of its last response and its body (kept, or handed to a sink as it arrives).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tlaloc/support/status.h"

namespace tlaloc::io::hub {

struct HttpRequest {
  std::string method = "GET";  // GET or HEAD
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  // libcurl sends a custom Authorization header only to the first host, so a token never
  // reaches the CDN a redirect points at.
  bool follow_redirects = false;
  std::optional<uint64_t> range_start;  // Range: bytes=N-
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // of the last response; lower-case names
  std::string body;                            // when no sink took it (up to 16 MiB)
  std::string effective_url;                   // after the redirects followed

  std::string Header(const std::string& lower_name) const;
};

// Called with each block of the body and the response's status; false aborts the transfer.
using BodySink = std::function<bool(long status, const char* data, size_t size)>;

// Performs the request. A transport failure (no connection, a connection dropped before the
// promised length, a stall of 60 s, an aborting sink) is Unavailable naming the method, the URL
// and libcurl's reason; any HTTP status is returned as a response for the caller to judge.
StatusOr<HttpResponse> HttpFetch(const HttpRequest& request, const BodySink& sink = nullptr);

// Percent-encodes one path segment or query value (libcurl's curl_easy_escape).
std::string UrlEscape(const std::string& text);

// `location` (absolute, or relative to `base`) made absolute; empty when libcurl cannot parse.
std::string ResolveUrl(const std::string& base, const std::string& location);

// "scheme://host:port" of a URL (the port explicit or the scheme's own), empty when unparsable.
std::string UrlOrigin(const std::string& url);

}  // namespace tlaloc::io::hub
