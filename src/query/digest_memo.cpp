#include "query/digest_memo.h"

#include <bit>
#include <cstring>

#include "common/process_secret.h"

namespace sci {

PageDigestMemo::PageDigestMemo(size_t entries) {
  const size_t capacity = std::bit_ceil(entries == 0 ? size_t{1} : entries);
  entries_ = std::make_unique<Entry[]>(capacity);
  mask_ = capacity - 1;
}

const PageDigestMemo::Key& PageDigestMemo::Root() {
  // Bytes 8..23 of the secret (ProcessSeed is bytes 0..7).
  static const Key root = [] {
    Key key;
    std::memcpy(&key.low, ProcessSecret().data() + 8, sizeof key.low);
    std::memcpy(&key.high, ProcessSecret().data() + 16, sizeof key.high);
    return key;
  }();
  return root;
}

PageDigestMemo& PageDigestMemo::ForThisThread() {
  thread_local std::unique_ptr<PageDigestMemo> memo;
  if (memo == nullptr) memo = std::make_unique<PageDigestMemo>();
  return *memo;
}

void PageDigestMemo::Clear() {
  if (++epoch_ != 0) return;
  // The epoch wrapped (after 4 billion clears): entries of epoch 1 would look
  // current again. They would still be right, but a clear promises a memo
  // that has seen nothing, so wipe them.
  for (size_t i = 0; i <= mask_; ++i) entries_[i] = Entry{};
  epoch_ = 1;
}

}  // namespace sci
