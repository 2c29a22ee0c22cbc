// Differential fuzzing of the object store (src/index/object_store.h: page
// entries for keys that decompose, a per-object table for the rest) against
// plain maps of object keys: random stores, removals by medium or whole,
// tenant clears and clears, over keys that decompose (SGLang ranks, vLLM
// prefixes, pool suffixes, a prefix ending in hex digits) and keys that do
// not (uppercase digests, 63 digits, plain names, bytes from the input).
// After every step every key of the universe must answer as the maps do,
// presence and media, and the store's object count must match.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "index/object_store.h"

namespace {

std::string Digest(uint8_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 64; ++i) out.push_back(digits[(n * 7 + i * (n | 1)) & 15]);
  return out;
}

std::string KeyOf(sci::fuzz::FuzzInput& in, std::vector<std::string>& extra) {
  const uint8_t shape = in.Byte();
  const std::string digest = Digest(in.Byte() % 6);
  const std::string rank = std::to_string(in.Byte() % 3);
  switch (shape % 9) {
    case 0: return digest + "_" + rank + "_k";
    case 1: return digest + "_" + rank + "_v";
    case 2: return "m@tp_rank:" + rank + "@" + digest;
    case 3: return digest + "__swa";
    case 4: return "ab" + digest + "_0_k";  // the digest starts two digits early
    case 5: {
      std::string upper = digest;
      for (char& c : upper) c = c >= 'a' ? static_cast<char>(c - 32) : c;
      return upper + "_" + rank;
    }
    case 6: return digest.substr(1) + "_" + rank + "_k";  // 63 digits
    case 7: return "object-" + rank;
    default: {
      // Bytes of the input around a digest, or alone.
      std::string key = in.String(6) + (in.Bool() ? digest : "") + in.String(6);
      if (key.empty()) key = "e";
      extra.push_back(key);
      return key;
    }
  }
}

struct NoLock {
  void Lock() {}
  void Unlock() {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sci::fuzz::FuzzInput in(data, size);
  const bool per_medium = in.Bool();
  const std::string tenants[3] = {"", "tenant-a", "tenant-b"};
  // Inputs of odd length run on tables split into parts from their first
  // store on (split_table.h), so that both forms of table see every path.
  sci::ObjectStore store(size % 2 == 1 ? 1 : 0);
  std::map<std::pair<int, std::string>, sci::MediaSet> model;
  std::vector<std::string> universe, extra;
  for (uint8_t d = 0; d < 6; ++d) {
    universe.push_back(Digest(d) + "_0_k");
    universe.push_back(Digest(d) + "_2_v");
    universe.push_back("m@tp_rank:1@" + Digest(d));
    universe.push_back("ab" + Digest(d) + "_0_k");
  }
  universe.push_back("object-0");
  for (int step = 0; step < 200 && in.remaining() > 0; ++step) {
    const uint8_t op = in.Byte() % 16;
    const int tenant = in.Byte() % 3;
    // Two of the tenants may share a tag (a clear of one then takes the
    // other's keys: the model follows the tags).
    const uint64_t seed = sci::TenantSeed(tenants[tenant]);
    if (op < 8) {
      const std::string key = KeyOf(in, extra);
      const auto medium = per_medium ? static_cast<sci::MediaSet>(in.Byte() & 7) : sci::MediaSet{0};
      // As the index stores: room made first, outside the lock (a split
      // happens only there).
      const sci::ObjectStore::Place place = store.Locate(seed, key);
      NoLock lock;
      store.MakeRoom(place, lock);
      store.Store(seed, key, place, medium);
      auto [it, added] = model.emplace(std::make_pair(tenant, key), medium);
      if (!added) {
        it->second = medium != 0 && it->second != 0 ? static_cast<sci::MediaSet>(it->second | medium) : medium;
      }
    } else if (op < 14) {
      const std::string key = KeyOf(in, extra);
      const auto medium = per_medium ? static_cast<sci::MediaSet>(in.Byte() & 7) : sci::MediaSet{0};
      const bool went = store.Remove(seed, key, medium);
      auto it = model.find({tenant, key});
      bool model_went = false;
      if (it != model.end()) {
        const auto left = static_cast<sci::MediaSet>(it->second & ~medium);
        if (medium != 0 && it->second != 0 && left != 0) {
          it->second = left;
        } else {
          model.erase(it);
          model_went = true;
        }
      }
      SCI_FUZZ_CHECK(went == model_went, "removal of %s: store says %d, model %d", key.c_str(), went, model_went);
    } else if (op < 15) {
      store.ClearTenant(seed);
      const uint32_t tag = sci::TenantTag(seed);
      std::erase_if(model, [&](const auto& e) { return sci::TenantTag(sci::TenantSeed(tenants[e.first.first])) == tag; });
    } else {
      store.Clear();
      model.clear();
    }
    for (int t = 0; t < 3; ++t) {
      const uint64_t s = sci::TenantSeed(tenants[t]);
      for (const std::vector<std::string>* keys : {&universe, &extra}) {
        for (const std::string& key : *keys) {
          const auto it = model.find({t, key});
          const bool present = it != model.end();
          SCI_FUZZ_CHECK(store.Contains(s, key) == present, "step %d tenant %d key '%s': store %d, model %d", step, t,
                         key.c_str(), !present, present);
          if (present) {
            SCI_FUZZ_CHECK(store.Media(s, key) == it->second, "step %d key '%s': media %d, model %d", step, key.c_str(),
                           store.Media(s, key), it->second);
          }
        }
      }
    }
    const std::string inconsistency = store.Inconsistency();
    SCI_FUZZ_CHECK(inconsistency.empty(), "step %d: %s", step, inconsistency.c_str());
    SCI_FUZZ_CHECK(store.objects() == model.size(), "step %d: %zu objects, model %zu", step,
                   static_cast<size_t>(store.objects()), model.size());
  }
  return 0;
}
