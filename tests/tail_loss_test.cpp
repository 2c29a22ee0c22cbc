// A loss at the tail of a quiet stream (issue #35 §3). The last batches a
// master sends before a quiet spell can be lost (its send queue, a failed
// send); a gap shows only when the next message comes, which on a quiet
// master may be never. The subscriber reads the master's GET
// /kv_events/status while connected and quiet: more batches published than
// the last sequence applied, and nothing within the grace period, is a loss:
// the index is cleared (tail_losses). Real ZeroMQ sockets and a real HTTP
// server (cpp-httplib) on loopback.
#include <gtest/gtest.h>

#include <httplib.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "feed/status_request.h"
#include "feed/subscriber.h"
#include "index/index.h"
#include "log_capture.h"
#include "loopback_publisher.h"
#include "wait_for.h"

namespace sci {
namespace {

using namespace std::chrono_literals;
using sci::testing::LoopbackPublisher;
using sci::testing::RemovedEvent;
using sci::testing::StoredEvent;
using sci::testing::WaitFor;

// The master's admin server as far as the status goes: it answers what the
// test sets (or 404), and counts the reads.
class StatusServer {
 public:
  StatusServer() {
    server_.Get("/kv_events/status", [this](const httplib::Request&, httplib::Response& response) {
      reads_.fetch_add(1);
      std::lock_guard<std::mutex> lock(mu_);
      if (missing_) {
        response.status = 404;
        return;
      }
      response.set_content(body_, "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw std::runtime_error("cannot bind the status server");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~StatusServer() {
    server_.stop();
    thread_.join();
  }
  void Publish(uint64_t batches) {
    std::lock_guard<std::mutex> lock(mu_);
    missing_ = false;
    body_ = "{\"enabled\":true,\"published_batches\":" + std::to_string(batches) +
            ",\"published_events\":0,\"dropped_events\":0,\"skipped_unparsed_keys\":0}";
  }
  void Missing() {
    std::lock_guard<std::mutex> lock(mu_);
    missing_ = true;
  }
  int reads() const { return reads_.load(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/kv_events/status"; }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  bool missing_ = true;
  std::string body_;
  std::atomic<int> reads_{0};
};

std::unique_ptr<Subscriber> Follow(Index& index, const LoopbackPublisher& publisher, const StatusServer& status) {
  SubscriberOptions options;
  options.endpoint = publisher.endpoint();
  options.status_url = status.url();
  options.status_poll_ms = 50;
  SubscriberError code = SubscriberError::kNone;
  std::string error;
  auto subscriber = Subscriber::Start(index, options, &code, &error);
  EXPECT_NE(subscriber, nullptr) << error;
  return subscriber;
}

class TailLoss : public ::testing::Test {
 protected:
  // Batches 1-3 applied: "a" stored, then removed in batch 3.
  void SetUp() override {
    subscriber_ = Follow(index_, publisher_, status_);
    ASSERT_NE(subscriber_, nullptr);
    ASSERT_TRUE(publisher_.AwaitSubscription());
    const MooncakeEvent one[] = {StoredEvent(1, "a"), StoredEvent(2, "b")};
    const MooncakeEvent two[] = {StoredEvent(3, "c")};
    const MooncakeEvent three[] = {RemovedEvent(4, "c")};
    publisher_.SendBatch(1, one);
    publisher_.SendBatch(2, two);
    publisher_.SendBatch(3, three);
    ASSERT_TRUE(WaitFor([&] { return index_.GetStats().last_sequence == 3; }));
  }

  testing::LogCapture log_;
  Index index_;
  LoopbackPublisher publisher_{sci::testing::kAnyLoopbackTcpPort};
  StatusServer status_;
  std::unique_ptr<Subscriber> subscriber_;
};

// Batches 4 and 5 (say, the removal of "a") never arrived, and the master
// went quiet: the status shows 5 published; the index must let "a" go.
TEST_F(TailLoss, MoreBatchesPublishedThanAppliedAndNothingComingClearsTheIndex) {
  status_.Publish(5);
  ASSERT_TRUE(WaitFor([&] { return index_.GetStats().tail_losses == 1; }, 10s));
  EXPECT_FALSE(index_.Contains({}, "a"));
  EXPECT_FALSE(index_.Contains({}, "b"));
  EXPECT_FALSE(index_.GetStats().has_sequence);
  EXPECT_EQ(log_.Count(LogLevel::kWarn, "5 batches published, the last applied is 3"), 1u);
  // The stream goes on: a run begins (its stores withheld), then applies.
  const MooncakeEvent six[] = {StoredEvent(9, "d")};
  const MooncakeEvent seven[] = {StoredEvent(10, "e")};
  publisher_.SendBatch(6, six);
  publisher_.SendBatch(7, seven);
  ASSERT_TRUE(WaitFor([&] { return index_.GetStats().last_sequence == 7; }));
  EXPECT_TRUE(index_.Contains({}, "e"));
}

// The status agrees with the cursor: reads go on (bounded by the interval)
// and nothing is cleared.
// 1.3.0: a status that goes on claiming the same batches -- lost for good,
// or another master's counters (the simulation's nemesis serves those) --
// costs one clear, not one every poll: the batches it claims were all sent
// before the clear, so whatever follows (a resync's snapshot, the stream
// from its next batch) reflects them. Only a count beyond them shows a loss.
TEST_F(TailLoss, AStatusThatKeepsClaimingTheSameBatchesClearsOnce) {
  status_.Publish(50);
  ASSERT_TRUE(WaitFor([&] { return index_.GetStats().tail_losses == 1; }, 10s));
  const MooncakeEvent four[] = {StoredEvent(5, "d")};
  const MooncakeEvent five[] = {StoredEvent(6, "e")};
  publisher_.SendBatch(4, four);  // begins a run: its store is withheld
  publisher_.SendBatch(5, five);
  ASSERT_TRUE(WaitFor([&] { return index_.Contains({}, "e"); }));
  const int reads = status_.reads();
  ASSERT_TRUE(WaitFor([&] { return status_.reads() >= reads + 3; }, 10s));
  EXPECT_EQ(index_.GetStats().tail_losses, 1u);
  EXPECT_TRUE(index_.Contains({}, "e"));
  status_.Publish(60);  // more than it claimed: a loss again
  ASSERT_TRUE(WaitFor([&] { return index_.GetStats().tail_losses == 2; }, 10s));
  EXPECT_FALSE(index_.Contains({}, "e"));
}

TEST_F(TailLoss, AStatusThatAgreesCostsNothing) {
  status_.Publish(3);
  ASSERT_TRUE(WaitFor([&] { return status_.reads() >= 4; }, 10s));
  EXPECT_EQ(index_.GetStats().tail_losses, 0u);
  EXPECT_EQ(index_.GetStats().clears, 0u);
  EXPECT_TRUE(index_.Contains({}, "a"));
}

// A batch the read counted that is still on its way is not a loss: it
// arrives within the grace period and the sequence rule takes it.
TEST_F(TailLoss, ABatchInFlightIsNotALoss) {
  status_.Publish(4);
  const int reads = status_.reads();
  ASSERT_TRUE(WaitFor([&] { return status_.reads() > reads; }, 10s));
  const MooncakeEvent four[] = {RemovedEvent(5, "a")};
  publisher_.SendBatch(4, four);
  ASSERT_TRUE(WaitFor([&] { return index_.GetStats().last_sequence == 4; }));
  EXPECT_FALSE(index_.Contains({}, "a"));
  EXPECT_TRUE(index_.Contains({}, "b"));
  EXPECT_EQ(index_.GetStats().tail_losses, 0u);
}

// A master without the endpoint is followed as in 1.2: counted, said once,
// read again only after a back-off, nothing cleared.
TEST_F(TailLoss, AMasterWithoutTheEndpointIsFollowedAsBefore) {
  status_.Missing();
  ASSERT_TRUE(WaitFor([&] { return index_.GetStats().status_unavailable >= 2; }, 10s));
  EXPECT_EQ(index_.GetStats().tail_losses, 0u);
  EXPECT_TRUE(index_.Contains({}, "a"));
  EXPECT_EQ(log_.Count(LogLevel::kWarn, "a loss at the stream's tail is not watched"), 1u);
}

TEST(PublisherStatus, TheAnswerIsReadStrictly) {
  PublisherStatus status;
  std::string why;
  EXPECT_TRUE(ParsePublisherStatus(R"({"enabled":true,"published_batches":42,"dropped_events":3})", &status, &why));
  EXPECT_EQ(status.published_batches, 42u);
  EXPECT_TRUE(status.has_dropped_events);
  EXPECT_EQ(status.dropped_events, 3u);
  EXPECT_TRUE(ParsePublisherStatus(R"({"published_batches":7})", &status, &why));
  EXPECT_EQ(status.published_batches, 7u);
  EXPECT_FALSE(status.has_dropped_events);  // then it bounds no catch-up (catch_up_anchor.h)
  EXPECT_FALSE(ParsePublisherStatus(R"({"enabled":false,"published_batches":42})", &status, &why));
  EXPECT_FALSE(ParsePublisherStatus(R"({"published_batches":-1})", &status, &why));
  EXPECT_FALSE(ParsePublisherStatus(R"({"published_batches":"42"})", &status, &why));
  EXPECT_FALSE(ParsePublisherStatus(R"({"published_batches":42,"dropped_events":-3})", &status, &why));
  EXPECT_EQ(why, "dropped_events is not a count below 2^64 - 1");
  EXPECT_FALSE(ParsePublisherStatus(R"({"published_batches":42,"dropped_events":1.5})", &status, &why));
  // 1.3.0: what 1.3 took on trust. "false" as a string is not true; a
  // counter at 2^64 - 1 is a wrapped or unset one (the tail watch acted on
  // it); a counter named twice holds whichever value the parser kept.
  EXPECT_FALSE(ParsePublisherStatus(R"({"enabled":"false","published_batches":42})", &status, &why));
  EXPECT_EQ(why, "enabled is not true or false");
  EXPECT_FALSE(ParsePublisherStatus(R"({"published_batches":18446744073709551615})", &status, &why));
  EXPECT_EQ(why, "no published_batches below 2^64 - 1");
  EXPECT_TRUE(ParsePublisherStatus(R"({"published_batches":18446744073709551614})", &status, &why));
  EXPECT_FALSE(
      ParsePublisherStatus(R"({"published_batches":42,"dropped_events":18446744073709551615})", &status, &why));
  EXPECT_FALSE(ParsePublisherStatus(R"({"published_batches":42,"dropped_events":0,"published_batches":9})", &status,
                                    &why));
  EXPECT_EQ(why, "\"published_batches\" appears twice");
  EXPECT_FALSE(ParsePublisherStatus(R"({"dropped_events":1,"published_batches":4,"dropped_events":1})", &status,
                                    &why));
  // Names nested deeper may repeat: they are not the counters.
  EXPECT_TRUE(ParsePublisherStatus(R"({"published_batches":4,"x":{"a":1},"y":{"a":2}})", &status, &why));
  EXPECT_FALSE(ParsePublisherStatus("[]", &status, &why));
  EXPECT_FALSE(ParsePublisherStatus("not json", &status, &why));
  EXPECT_EQ(StatusUrlBeside("http://master:9003/get_all_keys"), "http://master:9003/kv_events/status");
  EXPECT_EQ(StatusUrlBeside("https://10.0.0.2:9003"), "https://10.0.0.2:9003/kv_events/status");
  EXPECT_EQ(StatusUrlBeside(""), "");
}

}  // namespace
}  // namespace sci
