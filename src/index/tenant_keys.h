// How many present keys each tenant holds, and which, while it holds few:
// what a tenant's `cleared` must do.
//
// Why. The store files a key by its fingerprint, which carries only the
// tenant's tag, 8 public bits of its seed (fingerprint.h); so a clear that
// knows nothing else walks the whole store and drops every key of the tag,
// other tenants' too (a miss, never a false hit). Mooncake's master sends
// `cleared` after a remove-all's per-object removals, so the cleared tenant
// mostly holds nothing by then; yet with a few dozen tenants some share a
// tag, and each of their clears walked the whole store (about 2.5 ms an
// event at 1M keys) and dropped a neighbour's keys. And a tenant whose name
// was chosen to share another's tag (one name in 256 does) could wipe the
// other's keys by storing one key and clearing (an outside review of 1.4).
// Counted by the tenant's whole seed, a clear of a tenant holding nothing
// does nothing, and one whose keys are listed has them removed by name, as
// removals (no other tenant's key goes). A tenant is listed from its first
// key until it holds more than kListed keys or kListedBytes of names; then
// it stays unlisted until it holds nothing again (its names are gone), and
// its clear walks its tag as before. So the wipe above now costs a tag-mate
// kListed + 1 stores first (an outside review: store 1,025, remove all but
// one, clear), and such a walk costs the store's size once per kListed
// stores: bounded, not closed. Closing it needs more tenant bits in a
// fingerprint than the public 8 (docs/index-semantics.md).
//
// The writer's only (Index, under apply_mu_). What may allocate comes
// before the store (Prepare), as the event-hash digests' Add does, so an
// allocation failing changes nothing. Node containers with a keyed hash: a
// failed insertion changes nothing (I28), a record's address stays until it
// is erased, and keys a writer chose cannot share a bucket
// (deferred_stores.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "common/check.h"
#include "common/format.h"
#include "common/process_secret.h"
#include "common/siphash.h"

namespace sci {

class TenantKeys {
 public:
  // A tenant holding more keys than this, or names of more bytes, is no
  // longer listed. A listed name costs its bytes and about 60 more (a
  // string and a node): at most about 200 kB a tenant, whatever its keys'
  // length (keys may be 64 KiB each).
  static constexpr uint64_t kListed = 1024;
  static constexpr uint64_t kListedBytes = 128 * 1024;

  struct NameHash {
    using is_transparent = void;  // found by a string_view, no copy
    size_t operator()(std::string_view key) const {
      static const SipKey subkey = ProcessSubkey("tenant keys");
      return static_cast<size_t>(SipHash13(subkey, key));
    }
  };
  using Names = std::unordered_set<std::string, NameHash, std::equal_to<>>;

  // Ahead of a store that makes a key of the tenant whose seed is
  // `tenant_seed` present: its record, and the key's name while the tenant
  // is listed. Throws bad_alloc, changing nothing (the index then clears, as
  // for any store that cannot allocate); Unprepare takes it back if the
  // store itself fails.
  void Prepare(uint64_t tenant_seed, std::string_view key) {
    Record* record = Find(tenant_seed);
    if (record == nullptr) record = &records_.try_emplace(tenant_seed).first->second;  // may throw: nothing changed
    if (!record->listed || record->count >= kListed) return;  // Came unlists it past kListed
    if (record->bytes + key.size() > kListedBytes) {
      Unlist(*record);  // (a store that then fails leaves it unlisted: only a walk more)
      return;
    }
    try {
      record->names.emplace(key);
    } catch (const std::bad_alloc&) {
      Unprepare(tenant_seed, key);  // the record, if made for this key
      throw;
    }
    record->bytes += key.size();
  }
  void Unprepare(uint64_t tenant_seed, std::string_view key) noexcept {
    const auto it = records_.find(tenant_seed);
    if (it == records_.end()) return;
    Record& record = it->second;
    if (record.listed) ForgetName(record, key);
    if (record.count == 0 && record.names.empty()) Erase(it);
  }
  // The key made present after Prepare (Came), or a key of the tenant gone
  // (Went).
  void Came(uint64_t tenant_seed) noexcept {
    Record* record = Find(tenant_seed);
    SCI_DCHECK(record != nullptr, "a store is prepared before it comes");
    if (record == nullptr) return;
    if (++record->count > kListed && record->listed) Unlist(*record);
  }
  void Went(uint64_t tenant_seed, std::string_view key) noexcept {
    const auto it = records_.find(tenant_seed);
    if (it == records_.end() || it->second.count == 0) return;  // (a walk of its tag forgot it first)
    Record& record = it->second;
    if (--record.count == 0) {
      Erase(it);
      return;
    }
    if (record.listed) ForgetName(record, key);
  }

  // What a clear of the tenant whose seed is `tenant_seed` must do: nothing
  // (it holds no key), remove `names` (its keys, moved out: each removal's
  // Went then finds them gone), or walk its tag.
  enum class ClearBy { kNothing, kNames, kTagWalk };
  ClearBy PlanClear(uint64_t tenant_seed, Names* names) noexcept {
    Record* record = Find(tenant_seed);
    if (record == nullptr) return ClearBy::kNothing;
    if (!record->listed) return ClearBy::kTagWalk;
    *names = std::exchange(record->names, Names{});  // an empty set allocates nothing
    record->bytes = 0;
    return ClearBy::kNames;
  }
  // Whether the tenant holds a key.
  bool Holds(uint64_t tenant_seed) const { return records_.count(tenant_seed) != 0; }

  // A walk of tag `tag` dropped every key of every tenant with that tag.
  void ForgetTag(uint32_t tag) noexcept {
    last_ = nullptr;
    for (auto it = records_.begin(); it != records_.end();) {
      it = (it->first & 0xFF) == (tag & 0xFF) ? records_.erase(it) : std::next(it);
    }
  }
  // Every key went.
  void Clear() noexcept {
    records_.clear();
    last_ = nullptr;
  }

  // What disagrees with `present_keys` (the store's count), or "": the
  // counts sum to it, a listed tenant's names are its count, no record
  // counts nothing. For tests (Index::Inconsistency).
  std::string Inconsistency(uint64_t present_keys) const {
    uint64_t sum = 0;
    for (const auto& [seed, record] : records_) {
      if (record.count == 0) return "a tenant record that counts no key";
      if (record.listed && record.names.size() != record.count) {
        return sci::StrFormat("a listed tenant counts %d keys and lists %d", record.count, record.names.size());
      }
      if (record.listed && record.count > kListed) return "a tenant listed past kListed keys";
      uint64_t bytes = 0;
      for (const std::string& name : record.names) bytes += name.size();
      if (bytes != record.bytes || bytes > kListedBytes) return "a listed tenant's name bytes are miscounted or past kListedBytes";
      sum += record.count;
    }
    if (sum != present_keys) return sci::StrFormat("%d keys counted by tenant, %d present", sum, present_keys);
    return "";
  }
  size_t tenants() const { return records_.size(); }

 private:
  struct Record {
    uint64_t count = 0;   // present keys
    uint64_t bytes = 0;   // of `names`
    bool listed = true;   // `names` holds them all (count <= kListed, bytes <= kListedBytes)
    Names names;
  };

  // The last tenant looked up, kept: nearly every event names the tenant
  // the one before named, and a node's address stays until it is erased.
  Record* Find(uint64_t tenant_seed) {
    if (last_ != nullptr && last_seed_ == tenant_seed) return last_;
    const auto it = records_.find(tenant_seed);
    if (it == records_.end()) return nullptr;
    last_seed_ = tenant_seed;
    last_ = &it->second;
    return last_;
  }
  static void Unlist(Record& record) noexcept {
    record.listed = false;
    record.names = Names{};  // its memory goes back
    record.bytes = 0;
  }
  // A listed name goes. A set much emptier than its buckets is shrunk (a
  // tenant that stored 1,024 keys and kept one held 8 kB of buckets, an
  // outside review found); if that cannot allocate, it stays as it is.
  static void ForgetName(Record& record, std::string_view key) noexcept {
    const auto name = record.names.find(key);
    if (name == record.names.end()) return;
    record.bytes -= name->size();
    record.names.erase(name);
    if (record.names.bucket_count() > 64 && record.names.size() * 8 < record.names.bucket_count()) {
      try {
        record.names.rehash(0);
      } catch (const std::bad_alloc&) {
      }
    }
  }
  template <typename Iterator>
  void Erase(Iterator it) noexcept {
    if (last_ == &it->second) last_ = nullptr;
    records_.erase(it);
  }

  std::unordered_map<uint64_t, Record> records_;
  Record* last_ = nullptr;
  uint64_t last_seed_ = 0;
};

}  // namespace sci
