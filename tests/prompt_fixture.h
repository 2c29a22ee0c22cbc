// A test fixture base: an index, one layout, and a prompt of whole pages
// under it (its tokens, page hashes and each page's object keys), with the
// ways a test feeds those keys to the index (adoption_test, stray_keys_test).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "index/index.h"
#include "sglang/layout.h"
#include "sglang/page_hash.h"

namespace sci {

class PromptFixture : public ::testing::Test {
 protected:
  static constexpr uint32_t kPageSize = 4;

  static LayoutSpec TpSpec(uint32_t tp_size) {
    LayoutSpec spec;
    spec.page_size = kPageSize;
    spec.tp_size = tp_size;  // 2 * tp keys a page: "<hash>_0_k" ... under "sglang-hicache:<hash>"
    return spec;
  }
  void UseLayout(const LayoutSpec& spec) {
    std::string error;
    layout_ = Layout::Create(spec, &error);
    ASSERT_NE(layout_, nullptr) << error;
  }
  // A prompt of `pages` pages, its page hashes, and each page's keys.
  void MakePrompt(size_t pages, uint32_t first_token = 100) {
    tokens_.resize(pages * kPageSize);
    std::iota(tokens_.begin(), tokens_.end(), first_token);
    hashes_ = PageHashesHex(tokens_, kPageSize, false);
    keys_.clear();
    for (size_t page = 0; page < pages; ++page) keys_.push_back(layout_->KeysFor(hashes_[page], page, pages));
  }
  std::string Group(size_t page) const { return layout_->GroupId(hashes_[page]); }

  void Apply(const std::vector<Event>& events) { index_.ApplyBatch(next_sequence_++, events); }
  // An empty batch: the writer's next batch, which adopts what was asked.
  void Tick() { Apply({}); }
  // Loads keys as a snapshot does: no group. All the prompt's, or one page's.
  void LoadSnapshot() {
    for (size_t page = 0; page < keys_.size(); ++page) LoadSnapshotOf(page);
  }
  void LoadSnapshotOf(size_t page) {
    const std::vector<std::string_view> views(keys_[page].begin(), keys_[page].end());
    index_.LoadKeys(views);
  }

  std::unique_ptr<const Layout> layout_;
  Index index_{SGLangIndexOptions()};
  uint64_t next_sequence_ = 1;
  std::vector<uint32_t> tokens_;
  std::vector<std::string> hashes_;
  std::vector<std::vector<std::string>> keys_;
};

}  // namespace sci
