#include "page_life.h"

#include <utility>
#include <vector>

namespace sci::tools {

void ForEachPageLifeEvent(uint64_t n, std::span<const std::string> keys, ScriptEvent page,
                          const std::function<void(const ScriptEvent&)>& emit) {
  // Every key of a page lives alike, so the page's media are the keys'.
  std::vector<std::string> media;
  const auto step = [&](bool stored, const std::string& medium) {
    page.stored = stored;
    page.medium = medium;
    for (const std::string& key : keys) {
      page.object_key = key;
      emit(page);
    }
    if (stored) {
      media.push_back(medium);
    } else {
      std::erase(media, medium);
    }
  };
  const auto remove_everywhere = [&] {
    for (const std::string& medium : std::vector<std::string>(media)) step(false, medium);
  };
  step(true, "cpu");
  if (n % 2 == 0) step(true, "disk");
  if (n % 4 == 0) step(false, "cpu");
  if (n % 3 == 2) {
    remove_everywhere();
    step(true, "cpu");
  }
  if (n % 5 == 4) remove_everywhere();
}

}  // namespace sci::tools
