#include "io/hub_http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

namespace tlaloc::io::hub {

namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string Trim(const std::string& s) {
  const char* ws = " \t\r\n";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

struct Transfer {
  HttpResponse* response;
  const BodySink* sink;
  bool body_too_large = false;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string line(data, size * count);
  // Every response of a redirect chain starts with its status line: keep the last one's headers.
  if (line.rfind("HTTP/", 0) == 0) {
    t->response->headers.clear();
    const size_t space = line.find(' ');
    if (space != std::string::npos) t->response->status = std::atol(line.c_str() + space + 1);
    return size * count;
  }
  const size_t colon = line.find(':');
  if (colon != std::string::npos)
    t->response->headers[Lower(Trim(line.substr(0, colon)))] = Trim(line.substr(colon + 1));
  return size * count;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (*t->sink) return (*t->sink)(t->response->status, data, n) ? n : 0;
  if (t->response->body.size() + n > (16u << 20)) {
    t->body_too_large = true;
    return 0;
  }
  t->response->body.append(data, n);
  return n;
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
struct UrlDeleter {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};

}  // namespace

std::string HttpResponse::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? "" : it->second;
}

StatusOr<HttpResponse> HttpFetch(const HttpRequest& request, const BodySink& sink) {
  GlobalInit();
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) return Internal("libcurl: curl_easy_init failed");
  HttpResponse response;
  Transfer transfer{&response, &sink};
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  for (const std::string& h : request.headers)
    headers.reset(curl_slist_append(headers.release(), h.c_str()));
  char error[CURL_ERROR_SIZE] = {};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_USERAGENT, "tlaloc (huggingface_hub cache layout)");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // several threads download at once
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  // A transfer slower than 1 byte/s for 60 s is a dead connection: fail it so it is resumed.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  if (request.method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  std::string range;
  if (request.range_start) {
    range = std::to_string(*request.range_start) + "-";
    curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  }
  const CURLcode rc = curl_easy_perform(c);
  char* effective = nullptr;
  if (curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &effective) == CURLE_OK && effective)
    response.effective_url = effective;
  if (rc != CURLE_OK) {
    std::string why = error[0] ? error : curl_easy_strerror(rc);
    if (transfer.body_too_large) why = "the response is over 16 MiB";
    return Status(StatusCode::kUnavailable,
                  request.method + " " + request.url + " failed: " + Trim(why));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status != 0) response.status = status;
  return response;
}

std::string UrlEscape(const std::string& text) {
  GlobalInit();
  char* escaped = curl_easy_escape(nullptr, text.c_str(), static_cast<int>(text.size()));
  if (escaped == nullptr) return text;
  std::string out(escaped);
  curl_free(escaped);
  return out;
}

std::string ResolveUrl(const std::string& base, const std::string& location) {
  std::unique_ptr<CURLU, UrlDeleter> u(curl_url());
  if (!u || curl_url_set(u.get(), CURLUPART_URL, base.c_str(), 0) != CURLUE_OK) return "";
  if (curl_url_set(u.get(), CURLUPART_URL, location.c_str(), 0) != CURLUE_OK) return "";
  char* out = nullptr;
  if (curl_url_get(u.get(), CURLUPART_URL, &out, 0) != CURLUE_OK) return "";
  std::string result(out);
  curl_free(out);
  return result;
}

std::string UrlOrigin(const std::string& url) {
  std::unique_ptr<CURLU, UrlDeleter> u(curl_url());
  if (!u || curl_url_set(u.get(), CURLUPART_URL, url.c_str(), 0) != CURLUE_OK) return "";
  std::string parts[3];
  const CURLUPart which[3] = {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT};
  for (int i = 0; i < 3; ++i) {
    char* out = nullptr;
    if (curl_url_get(u.get(), which[i], &out, i == 2 ? CURLU_DEFAULT_PORT : 0) != CURLUE_OK)
      return "";
    parts[i] = Lower(out);
    curl_free(out);
  }
  return parts[0] + "://" + parts[1] + ":" + parts[2];
}

}  // namespace tlaloc::io::hub
