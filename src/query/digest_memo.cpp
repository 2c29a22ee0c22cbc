#include "query/digest_memo.h"

#include <bit>
#include <cstring>

#include "common/process_secret.h"
#include "common/thread_owned.h"

namespace sci {

PageDigestMemo::PageDigestMemo(size_t entries) {
  const size_t capacity = std::bit_ceil(entries == 0 ? size_t{1} : entries);
  entries_ = std::make_unique<Entry[]>(capacity);
  mask_ = capacity - 1;
}

const PageDigestMemo::Key& PageDigestMemo::Root() {
  // 128 bits of its own, derived from the process's secret.
  static const Key root = [] {
    const SipKey derived = ProcessSubkey("sglang memo root");
    Key key;
    key.low = derived.k0;
    key.high = derived.k1;
    return key;
  }();
  return root;
}

PageDigestMemo* PageDigestMemo::ForThisThread() { return ThreadOwned<PageDigestMemo>::Get(); }

void PageDigestMemo::Clear() {
  if (++epoch_ != 0) return;
  // The epoch wrapped (after 4 billion clears): entries of epoch 1 would look
  // current again. They would still be right, but a clear promises a memo
  // that has seen nothing, so wipe them.
  for (size_t i = 0; i <= mask_; ++i) entries_[i] = Entry{};
  epoch_ = 1;
}

}  // namespace sci
