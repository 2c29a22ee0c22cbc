// Where the Mooncake HA leader is: a "leader view" read from the store the
// masters elect themselves through (etcd: etcd_view.h; Redis:
// redis_view.h). LeaderFollower polls a LeaderViewSource and does not care
// which store is behind it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sci {

struct LeaderView {
  std::string host;     // the address without its port; "[...]" kept for IPv6
  std::string address;  // the leader's RPC address, "ip:port"
  // Which election produced the view: etcd's create_revision of the key, or
  // Redis' view_version. The same address under a new version is a new
  // leader (a restarted master), hence a new sequence space.
  int64_t version = 0;
};

enum class LeaderViewStatus {
  kFound,        // *view filled
  kAbsent,       // no view (between a leader's death and the next election)
  kMalformed,    // something is there but it is not a view (*error says what)
  kUnreachable,  // the store could not be asked (*error says why)
};

// Whether `address` is "host:port" with a port of 1..65535 and a host made
// only of what a host name or an IP literal may hold (nothing that could
// smuggle a path, credentials or another scheme into the URLs built from
// it); *host is the part before the port.
bool ParseLeaderAddress(std::string_view address, std::string* host);

class LeaderViewSource {
 public:
  virtual ~LeaderViewSource() = default;

  // One read of the view, bounded by the source's time-outs. Called from one
  // thread at a time (the follower's).
  virtual LeaderViewStatus Read(LeaderView* view, std::string* error) = 0;

  // From any thread: makes a Read in flight return at once (kUnreachable)
  // and every later one too. Never blocks on the store.
  virtual void Cancel() = 0;

  // For log lines: "etcd", "Redis".
  virtual const char* store_name() const = 0;
};

}  // namespace sci
