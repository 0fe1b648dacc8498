#include "server/curl_loader.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include <sys/socket.h>

namespace agentloop::server {
namespace {

// The few declarations of <curl/curl.h> this file uses. Their values are
// libcurl's ABI (stable since 7.x); Debian 12 ships 7.88.
using CURL = void;
struct curl_slist;
using CURLcode = int;
constexpr long kGlobalAll = 3;  // CURL_GLOBAL_ALL
constexpr int kOptUrl = 10002;
constexpr int kOptErrorBuffer = 10010;
constexpr int kOptReadData = 10009;
constexpr int kOptReadFunction = 20012;
constexpr int kOptUpload = 46;
constexpr int kOptNoSignal = 99;
constexpr int kOptUseSsl = 119;
constexpr int kOptCaInfo = 10065;
constexpr int kOptUsername = 10173;
constexpr int kOptPassword = 10174;
constexpr int kOptMailFrom = 10186;
constexpr int kOptMailRcpt = 10187;
constexpr int kOptTimeoutMs = 155;
constexpr int kOptConnectTimeoutMs = 156;
constexpr int kOptProtocolsStr = 10318;
constexpr int kOptInfileSizeLarge = 30115;
constexpr int kOptNoProgress = 43;
constexpr int kOptXferInfoFunction = 20219;
constexpr int kOptXferInfoData = 10057;
constexpr long kUseSslAll = 3;               // CURLUSESSL_ALL
constexpr int kInfoResponseCode = 0x200002;  // CURLINFO_RESPONSE_CODE
constexpr int kInfoActiveSocket = 0x50002c;  // CURLINFO_ACTIVESOCKET
constexpr size_t kErrorSize = 256;           // CURL_ERROR_SIZE

struct Curl {
  CURLcode (*global_init)(long);
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, int, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, int, ...);
  void (*easy_cleanup)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
};

Curl g_curl;

Status Load() {
  void* lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return Unavailable(std::string("email notifications need libcurl (Debian package libcurl4: "
                                   "apt-get install libcurl4): ") +
                       (why != nullptr ? why : "libcurl.so.4 not found"));
  }
  Curl c;
  std::string missing;
  auto get = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  get(c.global_init, "curl_global_init");
  get(c.easy_init, "curl_easy_init");
  get(c.easy_setopt, "curl_easy_setopt");
  get(c.easy_perform, "curl_easy_perform");
  get(c.easy_getinfo, "curl_easy_getinfo");
  get(c.easy_cleanup, "curl_easy_cleanup");
  get(c.easy_strerror, "curl_easy_strerror");
  get(c.slist_append, "curl_slist_append");
  get(c.slist_free_all, "curl_slist_free_all");
  if (!missing.empty()) {
    dlclose(lib);
    return Unavailable("libcurl.so.4 lacks " + missing + " (Debian 12's libcurl4 has them)");
  }
  if (c.global_init(kGlobalAll) != 0) return Unavailable("libcurl could not be initialised");
  g_curl = c;  // the library stays loaded for the life of the process
  return Status::Ok();
}

Status LoadCurl() {
  static std::once_flag once;
  static Status loaded = Status::Ok();
  std::call_once(once, [] { loaded = Load(); });
  return loaded;
}

struct Reader {
  const std::string* text;
  size_t offset = 0;
};

size_t ReadMessage(char* buf, size_t size, size_t n, void* user) {
  auto* r = static_cast<Reader*>(user);
  const size_t take = std::min(size * n, r->text->size() - r->offset);
  std::memcpy(buf, r->text->data() + r->offset, take);
  r->offset += take;
  return take;
}

// Called by libcurl at least once a second while a transfer runs: a
// non-zero answer aborts it.
int Progress(void* user, int64_t, int64_t, int64_t, int64_t) {
  const auto* cancel = static_cast<const std::atomic<bool>*>(user);
  return cancel != nullptr && cancel->load() ? 1 : 0;
}

}  // namespace

Status SendMail(const MailTransfer& m) {
  Status loaded = LoadCurl();
  if (!loaded.ok()) return loaded;
  const Curl& c = g_curl;
  CURL* h = c.easy_init();
  if (h == nullptr) return Unavailable("libcurl could not make a handle");
  curl_slist* rcpt = nullptr;
  for (const std::string& t : m.to) rcpt = c.slist_append(rcpt, ("<" + t + ">").c_str());
  char error[kErrorSize] = {0};
  Reader reader{&m.message};
  const std::string from = "<" + m.from + ">";
  c.easy_setopt(h, kOptErrorBuffer, error);
  c.easy_setopt(h, kOptUrl, m.url.c_str());
  c.easy_setopt(h, kOptProtocolsStr, "smtp,smtps");
  c.easy_setopt(h, kOptNoSignal, 1L);
  if (m.require_tls) c.easy_setopt(h, kOptUseSsl, kUseSslAll);
  if (!m.ca_file.empty()) c.easy_setopt(h, kOptCaInfo, m.ca_file.c_str());
  if (!m.user.empty()) {
    c.easy_setopt(h, kOptUsername, m.user.c_str());
    c.easy_setopt(h, kOptPassword, m.password.c_str());
  }
  c.easy_setopt(h, kOptMailFrom, from.c_str());
  c.easy_setopt(h, kOptMailRcpt, rcpt);
  c.easy_setopt(h, kOptUpload, 1L);
  c.easy_setopt(h, kOptReadFunction, &ReadMessage);
  c.easy_setopt(h, kOptReadData, &reader);
  c.easy_setopt(h, kOptInfileSizeLarge, static_cast<int64_t>(m.message.size()));
  c.easy_setopt(h, kOptTimeoutMs, static_cast<long>(m.timeout.count()));
  c.easy_setopt(h, kOptConnectTimeoutMs,
                static_cast<long>(std::min<int64_t>(m.timeout.count(), 10'000)));
  if (m.cancel != nullptr) {
    c.easy_setopt(h, kOptNoProgress, 0L);
    c.easy_setopt(h, kOptXferInfoFunction, &Progress);
    c.easy_setopt(h, kOptXferInfoData, m.cancel);
  }
  const CURLcode rc = c.easy_perform(h);
  long reply = 0;
  c.easy_getinfo(h, kInfoResponseCode, &reply);
  // The cleanup says QUIT and waits for the answer (up to libcurl's server
  // response timeout, two minutes): after a failure the relay may be the one
  // stalling, so its connection is shut first and the wait ends at once.
  int fd = -1;
  if (rc != 0 && c.easy_getinfo(h, kInfoActiveSocket, &fd) == 0 && fd >= 0) {
    ::shutdown(fd, SHUT_RDWR);
  }
  c.easy_cleanup(h);
  c.slist_free_all(rcpt);
  if (rc == 0) return Status::Ok();
  if (m.cancel != nullptr && m.cancel->load()) return Cancelled("the server is stopping");
  // libcurl's messages name the server's reply or the socket's failure,
  // never the credentials it was given.
  std::string why = error[0] != '\0' ? std::string(error) : std::string(c.easy_strerror(rc));
  for (size_t at; !m.password.empty() && (at = why.find(m.password)) != std::string::npos;) {
    why.replace(at, m.password.size(), "[redacted]");
  }
  return Unavailable("SMTP " + std::string(m.url) + ": " + why +
                     (reply != 0 ? " (last reply " + std::to_string(reply) + ")" : ""));
}

}  // namespace agentloop::server
