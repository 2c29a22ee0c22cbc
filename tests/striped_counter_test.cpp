// The readers' counters and their thread stripes (src/index/stats.h,
// src/index/thread_stripe.h): every add counts exactly once, whatever the
// number of threads (more threads than stripes share one), and threads take
// distinct stripes until they run out.
#include "index/stats.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <thread>
#include <vector>

namespace sci {
namespace {

TEST(ThreadStripe, ThreadsTakeDistinctStripesUntilTheyRunOut) {
  // First in this file: the threads of the next test take most stripes.
  // Threads take the next stripes in turn, so up to kThreadStripes never share.
  const uint32_t first = StripesInUse();
  if (first + 4 > kThreadStripes) GTEST_SKIP() << "this process has taken most stripes already";
  std::vector<uint32_t> stripes(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < stripes.size(); ++t) threads.emplace_back([&stripes, t] { stripes[t] = ThreadStripe(); });
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(std::set<uint32_t>(stripes.begin(), stripes.end()).size(), stripes.size());
  EXPECT_EQ(StripesInUse(), first + 4);
  EXPECT_EQ(ThreadStripe(), ThreadStripe()) << "a thread keeps its stripe";
}

TEST(StripedCounter, CountsEveryAddFromMoreThreadsThanStripes) {
  constexpr int kThreads = static_cast<int>(kThreadStripes) + 8;
  constexpr uint64_t kAdds = 5000;
  StripedCounter counter;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&counter, t] {
      for (uint64_t i = 0; i < kAdds; ++i) counter.Add(static_cast<uint64_t>(t % 3) + 1);
    });
  }
  for (std::thread& thread : threads) thread.join();
  uint64_t expected = 0;
  for (int t = 0; t < kThreads; ++t) expected += kAdds * (static_cast<uint64_t>(t % 3) + 1);
  EXPECT_EQ(counter.Get(), expected);
}

}  // namespace
}  // namespace sci
