// Test support: the store a Mooncake HA leader view lives in, real etcd or
// real Redis, behind one interface, so that the HA tests (leader_follow_test,
// failover_test) run the same story against both backends:
//
//   auto store = sci::testing::ViewStore::Start("redis", "sci{test}/", "sci_test_");
//   ASSERT_TRUE(store->ok()) << store->error();
//   store->Elect("127.0.0.2:50051");  // a new election naming that leader
//   store->candidate_flags();          // {"--redis", "redis://127.0.0.1:P"} for sci-publish
//
// Each writes the view as its Mooncake backend does: etcd the key
// mooncake-store/<cluster>/master_view (its create_revision tells one
// election from the next), Redis the hash mooncake-store/{<ns>}/master_view
// with leader_address and view_version (INCR'd per election).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "etcd_process.h"
#include "redis_process.h"

namespace sci::testing {

class ViewStore {
 public:
  virtual ~ViewStore() = default;

  // "etcd" or "redis"; `redis_ns` is <ns> of `cluster_id` as the test
  // spells it (so the library's escaping is checked, not reused).
  static std::unique_ptr<ViewStore> Start(const std::string& kind, const std::string& cluster_id,
                                          const std::string& redis_ns);

  virtual bool ok() const = 0;
  virtual std::string error() const = 0;
  // The subscriber option's value: etcd_endpoints (a list whose first entry
  // never answers) or redis_endpoint.
  virtual std::string subscriber_endpoint() const = 0;
  virtual bool is_redis() const = 0;
  // sci-publish's flags that make it a candidate in this store.
  virtual std::vector<std::string> candidate_flags() const = 0;
  // A new election naming `address` (the old view goes first).
  virtual bool Elect(const std::string& address) = 0;
  // A view that is not one: an address that is not host:port.
  virtual bool Malform() = 0;
  virtual void Stop() = 0;
};

class EtcdViewStore : public ViewStore {
 public:
  explicit EtcdViewStore(const std::string& cluster_id) : key_("mooncake-store/" + cluster_id + "/master_view") {}
  bool ok() const override { return etcd_.ok(); }
  std::string error() const override { return etcd_.error(); }
  std::string subscriber_endpoint() const override { return "http://127.0.0.1:1," + etcd_.endpoint(); }
  bool is_redis() const override { return false; }
  std::vector<std::string> candidate_flags() const override { return {"--etcd", etcd_.endpoint()}; }
  bool Elect(const std::string& address) override { return etcd_.Delete(key_) && etcd_.Put(key_, address); }
  bool Malform() override { return etcd_.Put(key_, "not an address"); }
  void Stop() override { etcd_.Stop(); }

 private:
  EtcdProcess etcd_;
  const std::string key_;
};

class RedisViewStore : public ViewStore {
 public:
  explicit RedisViewStore(const std::string& ns)
      : view_key_("mooncake-store/{" + ns + "}/master_view"),
        version_key_("mooncake-store/{" + ns + "}/master_view_version") {}
  bool ok() const override { return redis_.ok(); }
  std::string error() const override { return redis_.error(); }
  std::string subscriber_endpoint() const override { return redis_.url(); }
  bool is_redis() const override { return true; }
  std::vector<std::string> candidate_flags() const override { return {"--redis", redis_.url()}; }
  bool Elect(const std::string& address) override {
    std::string version;
    return redis_.Cli({"DEL", view_key_}) && redis_.Cli({"INCR", version_key_}, &version) &&
           redis_.Cli({"HSET", view_key_, "leader_address", address, "view_version", version, "owner_token", "t"});
  }
  bool Malform() override { return redis_.Cli({"HSET", view_key_, "leader_address", "not an address"}); }
  void Stop() override { redis_.Stop(); }
  RedisProcess& redis() { return redis_; }

 private:
  RedisProcess redis_;
  const std::string view_key_, version_key_;
};

inline std::unique_ptr<ViewStore> ViewStore::Start(const std::string& kind, const std::string& cluster_id,
                                                   const std::string& redis_ns) {
  if (kind == "etcd") return std::make_unique<EtcdViewStore>(cluster_id);
  return std::make_unique<RedisViewStore>(redis_ns);
}

}  // namespace sci::testing
