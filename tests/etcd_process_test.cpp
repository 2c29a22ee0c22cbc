// The etcd test harness itself (tests/etcd_process.h): a real etcd starts
// on free loopback ports, answers key operations, dies when killed, and
// leaves no data directory behind.
#include "etcd_process.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace sci::testing {
namespace {

TEST(EtcdProcess, StartsHealthyAndStoresKeys) {
  EtcdProcess etcd;
  ASSERT_TRUE(etcd.ok()) << etcd.error();
  EXPECT_EQ(etcd.endpoint().rfind("http://127.0.0.1:", 0), 0u) << etcd.endpoint();
  EXPECT_TRUE(etcd.Healthy());

  EXPECT_EQ(etcd.Get("mooncake-store/c/master_view"), std::nullopt);
  ASSERT_TRUE(etcd.Put("mooncake-store/c/master_view", "127.0.0.2:50051")) << etcd.error();
  EXPECT_EQ(etcd.Get("mooncake-store/c/master_view"), "127.0.0.2:50051");
  ASSERT_TRUE(etcd.Delete("mooncake-store/c/master_view")) << etcd.error();
  EXPECT_EQ(etcd.Get("mooncake-store/c/master_view"), std::nullopt);
}

TEST(EtcdProcess, TwoRunSideBySideOnTheirOwnPorts) {
  EtcdProcess first, second;
  ASSERT_TRUE(first.ok()) << first.error();
  ASSERT_TRUE(second.ok()) << second.error();
  EXPECT_NE(first.client_port(), second.client_port());
  ASSERT_TRUE(first.Put("k", "first"));
  EXPECT_EQ(second.Get("k"), std::nullopt);
}

TEST(EtcdProcess, KilledIsUnreachableAndTheDirectoryIsRemoved) {
  std::filesystem::path dir;
  {
    EtcdProcess etcd;
    ASSERT_TRUE(etcd.ok()) << etcd.error();
    ASSERT_TRUE(etcd.Put("k", "v"));
    etcd.Kill();
    EXPECT_FALSE(etcd.Healthy());
    EXPECT_FALSE(etcd.Put("k", "w"));
    dir = etcd.directory();
    EXPECT_TRUE(std::filesystem::exists(dir / "etcd.log"));
  }
  ASSERT_FALSE(dir.empty());
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
}

}  // namespace
}  // namespace sci::testing
