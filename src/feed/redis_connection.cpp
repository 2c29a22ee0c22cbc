#include "feed/redis_connection.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>

#include "absl/strings/escaping.h"
#include "common/format.h"
#include "common/sigpipe_block.h"

namespace sci {
namespace {

constexpr std::string_view kScheme = "redis://";

bool ParseUint(std::string_view text, uint32_t max, uint32_t* out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size() && *out <= max;
}

// %XX sequences of a URL's user information, decoded.
bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    uint32_t byte = 0;
    if (i + 2 >= in.size()) return false;
    auto [end, ec] = std::from_chars(in.data() + i + 1, in.data() + i + 3, byte, 16);
    if (ec != std::errc() || end != in.data() + i + 3) return false;
    out->push_back(static_cast<char>(byte));
    i += 2;
  }
  return true;
}

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_' || c == ':';
}

RedisReply CopyReply(const redisReply& r) {
  RedisReply out;
  switch (r.type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      out.type = r.type == REDIS_REPLY_STRING   ? RedisReply::Type::kString
                 : r.type == REDIS_REPLY_STATUS ? RedisReply::Type::kStatus
                                                : RedisReply::Type::kError;
      out.text.assign(r.str, r.len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r.integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      for (size_t i = 0; i < r.elements; ++i) out.elements.push_back(CopyReply(*r.element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
  }
  return out;
}

}  // namespace

bool ParseRedisUrl(std::string_view url, RedisAddress* address, std::string* error) {
  if (url.substr(0, kScheme.size()) != kScheme) {
    *error = url.substr(0, 9) == "rediss://" ? "rediss:// (TLS) is not supported"
                                               : "must look like redis://[:password@]host:port[/db]";
    return false;
  }
  url.remove_prefix(kScheme.size());
  RedisAddress out;
  if (const size_t at = url.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = url.substr(0, at);
    url.remove_prefix(at + 1);
    const size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      *error = "the part before '@' must be :password or user:password";
      return false;
    }
    if (!PercentDecode(userinfo.substr(0, colon), &out.user) ||
        !PercentDecode(userinfo.substr(colon + 1), &out.password)) {
      *error = "the user or password has a malformed %-escape";
      return false;
    }
    if (out.password.empty()) {
      *error = "the password after ':' is empty";
      return false;
    }
  }
  std::string_view hostport = url.substr(0, url.find('/'));
  const std::string_view path = url.substr(hostport.size());
  std::string_view port;
  if (!hostport.empty() && hostport.front() == '[') {  // [IPv6]:port
    const size_t close = hostport.find(']');
    if (close == std::string_view::npos) {
      *error = "an IPv6 host lacks its ']'";
      return false;
    }
    out.host.assign(hostport.substr(1, close - 1));
    const std::string_view rest = hostport.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') {
      *error = "expected ':port' after the IPv6 host";
      return false;
    }
    if (!rest.empty()) port = rest.substr(1);
  } else {
    const size_t colon = hostport.find(':');
    out.host.assign(hostport.substr(0, colon));
    if (colon != std::string_view::npos) port = hostport.substr(colon + 1);
    if (colon != std::string_view::npos && port.empty()) {
      *error = "the port after ':' is empty";
      return false;
    }
  }
  if (out.host.empty()) {
    *error = "the host is empty";
    return false;
  }
  for (char c : out.host) {
    if (!IsHostChar(c)) {
      *error = sci::StrFormat("the host \"%s\" is not a host name or an IP address", absl::CHexEscape(out.host));
      return false;
    }
  }
  uint32_t value = 0;
  if (!port.empty()) {
    if (!ParseUint(port, 65535, &value) || value == 0) {
      *error = sci::StrFormat("the port \"%s\" is not 1..65535", absl::CHexEscape(std::string(port)));
      return false;
    }
    out.port = static_cast<uint16_t>(value);
  }
  if (path.size() > 1) {
    if (!ParseUint(path.substr(1), 1u << 30, &value)) {
      *error = sci::StrFormat("the database \"%s\" is not a number", absl::CHexEscape(std::string(path.substr(1))));
      return false;
    }
    out.db = value;
  }
  out.display = sci::StrFormat("redis://%s:%d/%d", hostport.front() == '[' ? "[" + out.host + "]" : out.host,
                                out.port, out.db);
  *address = std::move(out);
  return true;
}

RedisConnection::RedisConnection(RedisAddress address, std::chrono::milliseconds timeout)
    : address_(std::move(address)), timeout_(timeout), cancel_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

RedisConnection::~RedisConnection() {
  Drop();
  if (cancel_fd_ >= 0) ::close(cancel_fd_);
}

void RedisConnection::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  if (cancel_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(cancel_fd_, &one, sizeof one);
  }
  // A blocked read or write on it returns at once. The socket is closed
  // only under mu_ (Drop), so this never hits a number reused meanwhile.
  if (live_fd_ >= 0) ::shutdown(live_fd_, SHUT_RDWR);
}

void RedisConnection::Drop() {
  if (context_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  live_fd_ = -1;
  redisFree(context_);  // closes the socket
  context_ = nullptr;
}

bool RedisConnection::Connect(std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  // Blocking for a name (a numeric host resolves at once).
  const int rc = ::getaddrinfo(address_.host.c_str(), std::to_string(address_.port).c_str(), &hints, &found);
  if (rc != 0) {
    *error = sci::StrFormat("%s: cannot resolve the host: %s", address_.display, gai_strerror(rc));
    return false;
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, &::freeaddrinfo);
  std::string last = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = std::strerror(errno);
      continue;
    }
    int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd fds[] = {{fd, POLLOUT, 0}, {cancel_fd_, POLLIN, 0}};
      const int n = ::poll(fds, 2, static_cast<int>(timeout_.count()));
      if (n == 0) {
        err = ETIMEDOUT;
      } else if (n < 0 || (fds[1].revents & POLLIN) != 0) {
        ::close(fd);
        *error = "cancelled";
        return false;
      } else {
        socklen_t len = sizeof err;
        if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    if (err != 0) {
      ::close(fd);
      last = std::strerror(err);
      continue;
    }
    // hiredis' synchronous API wants a blocking socket; SO_RCVTIMEO and
    // SO_SNDTIMEO (redisSetTimeout) bound each step instead.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    redisContext* context = redisConnectFd(fd);
    if (context == nullptr || context->err != 0) {
      last = context != nullptr ? context->errstr : "out of memory";
      if (context != nullptr) redisFree(context);  // closes fd
      else ::close(fd);
      continue;
    }
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout_.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((timeout_.count() % 1000) * 1000);
    redisSetTimeout(context, tv);
    {
      std::lock_guard<std::mutex> lock(mu_);
      context_ = context;
      live_fd_ = fd;
      if (cancelled_) ::shutdown(fd, SHUT_RDWR);
    }
    return true;
  }
  *error = sci::StrFormat("%s: cannot connect: %s", address_.display, last);
  return false;
}

bool RedisConnection::RunOnce(const std::vector<std::string>& argv, RedisReply* reply, std::string* error) {
  std::vector<const char*> args;
  std::vector<size_t> lengths;
  for (const std::string& a : argv) {
    args.push_back(a.data());
    lengths.push_back(a.size());
  }
  void* raw = nullptr;
  {
    // hiredis writes with write(2): after Cancel's shutdown, or to a Redis
    // that went away, that raises SIGPIPE (common/sigpipe_block.h).
    SigpipeBlock no_sigpipe;
    raw = redisCommandArgv(context_, static_cast<int>(args.size()), args.data(), lengths.data());
  }
  if (raw == nullptr) {
    *error = sci::StrFormat("%s: %s", address_.display,
                             context_->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)
                                 ? std::string("timed out")
                                 : std::string(context_->errstr));
    Drop();
    return false;
  }
  *reply = CopyReply(*static_cast<redisReply*>(raw));
  freeReplyObject(raw);
  return true;
}

bool RedisConnection::Command(const std::vector<std::string>& argv, RedisReply* reply, std::string* error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cancelled_ || cancel_fd_ < 0) {
      *error = cancelled_ ? "cancelled" : "cannot create an eventfd";
      return false;
    }
  }
  if (context_ == nullptr) {
    if (!Connect(error)) return false;
    // Each new connection is authenticated and pointed at its database.
    std::vector<std::vector<std::string>> setup;
    if (!address_.password.empty()) {
      setup.push_back(address_.user.empty() ? std::vector<std::string>{"AUTH", address_.password}
                                            : std::vector<std::string>{"AUTH", address_.user, address_.password});
    }
    if (address_.db != 0) setup.push_back({"SELECT", std::to_string(address_.db)});
    for (const auto& command : setup) {
      RedisReply answer;
      if (!RunOnce(command, &answer, error)) return false;
      if (answer.type == RedisReply::Type::kError) {
        *error = sci::StrFormat("%s: %s refused: %s", address_.display, command[0], answer.text);
        Drop();
        return false;
      }
    }
  }
  return RunOnce(argv, reply, error);
}

}  // namespace sci
