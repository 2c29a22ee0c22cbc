// An index of a named size holding the objects of the benchmark requests,
// shared by every query benchmark of that size.
//
// Each size's index is built on first use and kept for the process: the
// objects of every request registered for that size (stored as SGLang
// stores them, with group ids, in 64-event batches), then foreign pages
// (other prompts' objects, tp8-shaped: 16 keys and one group per page) up to
// exactly the named number of present keys. Building it once per size keeps
// a full run short, and a filtered smoke run never builds a size it does not
// ask for.
//
// Requests are registered before benchmarks run (from the registration
// code), so the index of a size never changes size between benchmarks.
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "index/event.h"
#include "index/index.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"
#include "workloads.h"

namespace sci::bench {

struct RequestSpec {
  std::string layout;
  size_t pages = 0;
  HitMix mix = HitMix::kAll;
  uint32_t prompt = 0;  // distinguishes requests of the same shape (other tokens)
  auto Tie() const { return std::tie(layout, pages, mix, prompt); }
  bool operator<(const RequestSpec& other) const { return Tie() < other.Tie(); }
};

struct Request {
  RequestSpec spec;
  std::unique_ptr<const Layout> layout;
  std::vector<uint32_t> tokens;
  std::vector<std::string> hashes;  // hex page hashes
  size_t stored_pages = 0;          // the leading pages whose objects the index holds
  size_t required_keys = 0;         // keys the request's pages need, all pages counted
  // The stored event of each stored page's first key (DropVerification).
  std::vector<std::string> restore_keys, restore_groups;
  std::vector<Event> restore;
};

// "<64 hex>" of foreign page `id`: unrelated to any request's hashes.
inline std::string ForeignPageHash(uint64_t id, uint64_t salt) {
  char buf[65];
  std::snprintf(buf, sizeof buf, "%016llx%016llx%016llx%016llx",
                static_cast<unsigned long long>(SplitMix64(id ^ salt)),
                static_cast<unsigned long long>(SplitMix64(id + 1)),
                static_cast<unsigned long long>(SplitMix64(id + 2 + salt)), static_cast<unsigned long long>(id));
  return std::string(buf, 64);
}

// Applies stored (or removed) events of foreign tp8 pages `first_page...`
// covering `n_keys` keys, with their group ids, in 64-event batches, on
// `medium`.
inline void ApplyForeignPages(Index& index, uint64_t first_page, uint64_t n_keys, bool stored, uint64_t salt,
                              uint64_t* sequence, std::string_view medium = "cpu", uint64_t keys_per_page = 16) {
  constexpr size_t kBatch = 64;
  const uint64_t kKeysPerPage = keys_per_page;
  std::vector<std::string> keys(kBatch), groups(kBatch);
  std::vector<Event> batch(kBatch);
  size_t filled = 0;
  std::string hash;
  for (uint64_t k = 0; k < n_keys; ++k) {
    const uint64_t page = first_page + k / kKeysPerPage;
    const uint64_t slot = k % kKeysPerPage;
    if (slot == 0) hash = ForeignPageHash(page, salt);  // once a page
    keys[filled] = hash + "_" + std::to_string(slot / 2) + (slot % 2 == 0 ? "_k" : "_v");
    groups[filled] = "sglang-hicache:" + hash;
    batch[filled] = Event{stored ? EventKind::kStored : EventKind::kRemoved, keys[filled], groups[filled], {}, medium};
    if (++filled == kBatch || k + 1 == n_keys) {
      index.ApplyBatch((*sequence)++, std::span<const Event>(batch.data(), filled));
      filled = 0;
    }
  }
}

// The medium a request's page is stored on: "cpu", or with
// `odd_pages_on_disk` "disk" for every odd page (the tier benchmarks).
inline std::string_view PageMedium(size_t page, bool odd_pages_on_disk) {
  return odd_pages_on_disk && page % 2 == 1 ? "disk" : "cpu";
}

// Applies the objects of the first `stored_pages` pages of a request (page
// hashes `hashes`) as SGLang stores them: every key of a page labelled with
// its group id, in 64-event batches, on PageMedium. Returns the keys all
// its pages need.
inline size_t StoreRequestObjects(Index& index, const Layout& layout, const std::vector<std::string>& hashes,
                                  size_t stored_pages, uint64_t* sequence, bool odd_pages_on_disk = false) {
  const size_t pages = hashes.size();
  size_t required_keys = 0;
  std::vector<std::string> keys, groups;
  std::vector<std::string_view> media;
  for (size_t page = 0; page < pages; ++page) {
    const std::vector<std::string> page_keys = layout.KeysFor(hashes[page], page, pages);
    required_keys += page_keys.size();
    if (page >= stored_pages) continue;
    for (const std::string& key : page_keys) {
      keys.push_back(key);
      groups.push_back(layout.GroupId(hashes[page]));
      media.push_back(PageMedium(page, odd_pages_on_disk));
    }
  }
  for (size_t first = 0; first < keys.size(); first += 64) {
    std::vector<Event> batch;
    for (size_t i = first; i < std::min(keys.size(), first + 64); ++i) {
      batch.push_back(Event{EventKind::kStored, keys[i], groups[i], {}, media[i]});
    }
    index.ApplyBatch((*sequence)++, batch);
  }
  return required_keys;
}

class QueryFixture {
 public:
  // Call before benchmarks run: the index of `size` will hold this request.
  static void Register(uint64_t size, const RequestSpec& spec) { Registry()[size].emplace(spec, nullptr); }

  // The index of `size`, built on first call.
  static QueryFixture& ForSize(uint64_t size) {
    static std::map<uint64_t, std::unique_ptr<QueryFixture>> fixtures;
    std::unique_ptr<QueryFixture>& fixture = fixtures[size];
    if (fixture == nullptr) fixture.reset(new QueryFixture(size));
    return *fixture;
  }

  Index& index() { return *index_; }
  uint64_t size() const { return size_; }
  // Foreign keys: pages 0.. of ApplyForeignPages with salt size(), the last
  // page possibly partial.
  uint64_t foreign_keys() const { return foreign_keys_; }

  const Request& request(const RequestSpec& spec) const {
    const auto& requests = Registry().at(size_);
    auto it = requests.find(spec);
    if (it == requests.end() || it->second == nullptr) throw std::logic_error("request not registered");
    return *it->second;
  }

  // Stores the first key of each of `request`'s stored pages again, under
  // its group: a new object of the group invalidates its verification, so
  // the next query of the request takes the exact path (and verifies the
  // groups again). The keys stay present and under the same group.
  void DropVerification(const Request& request) {
    for (size_t first = 0; first < request.restore.size(); first += 64) {
      const size_t n = std::min<size_t>(64, request.restore.size() - first);
      index_->ApplyBatch(sequence_++, std::span<const Event>(request.restore).subspan(first, n));
    }
  }

  // The next batch's sequence, for a benchmark that applies its own events.
  uint64_t* sequence() { return &sequence_; }

 private:
  using Requests = std::map<RequestSpec, std::unique_ptr<Request>>;
  static std::map<uint64_t, Requests>& Registry() {
    static std::map<uint64_t, Requests> registry;
    return registry;
  }

  explicit QueryFixture(uint64_t size) : size_(size) {
    index_ = std::make_unique<Index>(SGLangIndexOptions(IndexOptions{.max_entries = size * 2 + (uint64_t{1} << 20)}));
    std::fprintf(stderr, "building the %llu-key index...\n", static_cast<unsigned long long>(size));
    uint64_t seed = 1;
    for (auto& [spec, request] : Registry()[size]) {
      request = std::make_unique<Request>();
      request->spec = spec;
      request->layout = LayoutNamed(spec.layout);
      request->tokens = PromptTokens(size * 1000 + seed++, spec.pages);
      request->hashes = PageHashesHex(request->tokens, kPageSize, false);
      request->stored_pages = StoredPages(spec.mix, spec.pages);
      StoreRequest(*request);
    }
    const uint64_t present = index_->GetStats().keys;
    if (present > size) throw std::logic_error("requests alone exceed the index size");
    foreign_keys_ = size - present;
    ApplyForeignPages(*index_, 0, foreign_keys_, /*stored=*/true, /*salt=*/size, &sequence_);
    if (index_->GetStats().keys != size) throw std::logic_error("index does not hold the named number of keys");
  }

  void StoreRequest(Request& request) {
    request.required_keys =
        StoreRequestObjects(*index_, *request.layout, request.hashes, request.stored_pages, &sequence_);
    const size_t pages = request.spec.pages;
    for (size_t page = 0; page < request.stored_pages && page < pages; ++page) {
      request.restore_keys.push_back(request.layout->KeysFor(request.hashes[page], page, pages).front());
      request.restore_groups.push_back(request.layout->GroupId(request.hashes[page]));
    }
    // Events view the strings: built once both vectors are complete.
    for (size_t i = 0; i < request.restore_keys.size(); ++i) {
      request.restore.push_back(Event{EventKind::kStored, request.restore_keys[i], request.restore_groups[i], {}, "cpu"});
    }
  }

  const uint64_t size_;
  std::unique_ptr<Index> index_;
  uint64_t foreign_keys_ = 0;
  uint64_t sequence_ = 1;
};

}  // namespace sci::bench
