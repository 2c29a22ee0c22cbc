// Test support: a real etcd on free loopback ports with a temporary data
// directory, killed and removed when the object goes; and the few v3 JSON
// gateway calls a test needs to play a Mooncake master's election (put,
// delete the view key). Minimal on purpose: sci-publish's election and its
// own harness are elsewhere.
#pragma once

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include "absl/strings/escaping.h"
#include "child_process.h"
#include "loopback_publisher.h"

namespace sci::testing {

// A port that was free on 127.0.0.1 a moment ago.
inline int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error("no free loopback port");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

class EtcdInstance {
 public:
  explicit EtcdInstance(const std::string& executable) {
    char dir[] = "/tmp/sci-etcd-XXXXXX";
    if (::mkdtemp(dir) == nullptr) throw std::runtime_error("mkdtemp");
    data_dir_ = dir;
    client_port_ = FreeLoopbackPort();
    const int peer_port = FreeLoopbackPort();
    const std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port);
    std::string error;
    process_ = ChildProcess::Spawn({executable, "--name", "sci-test", "--data-dir", data_dir_,
                                    "--listen-client-urls", client, "--advertise-client-urls", client,
                                    "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                                    "--initial-cluster", "sci-test=" + peer, "--logger", "zap", "--log-level",
                                    "error"},
                                   {}, &error);
    if (process_ == nullptr) throw std::runtime_error(error);
    if (!WaitFor([&] { return Post("/v3/kv/range", R"({"key":"AA=="})") == 200; }, std::chrono::seconds(30))) {
      throw std::runtime_error("etcd did not come up on " + client);
    }
  }
  ~EtcdInstance() {
    Stop();
    std::error_code ignored;
    std::filesystem::remove_all(data_dir_, ignored);
  }

  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(client_port_); }

  // Kills the server (the data directory stays until destruction).
  void Stop() { process_.reset(); }

  bool Put(const std::string& key, const std::string& value) {
    return Post("/v3/kv/put", R"({"key":")" + absl::Base64Escape(key) + R"(","value":")" +
                                  absl::Base64Escape(value) + R"("})") == 200;
  }
  bool Delete(const std::string& key) {
    return Post("/v3/kv/deleterange", R"({"key":")" + absl::Base64Escape(key) + R"("})") == 200;
  }

 private:
  int Post(const std::string& path, const std::string& body) {
    httplib::Client client("127.0.0.1", client_port_);
    client.set_connection_timeout(1);
    client.set_read_timeout(5);
    const auto result = client.Post(path, body, "application/json");
    return result ? result->status : -1;
  }

  std::string data_dir_;
  int client_port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace sci::testing
