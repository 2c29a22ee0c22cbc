// A small, strict command-line parser for the tools: every flag is
// declared (name, value or not, help line), so unknown flags and missing
// values are errors, and --help is generated from the same table.
//
//   --name value   --name=value   --switch
//
// `-h` is `--help`, `-v` and `-V` are `--version`; a flag may be declared
// as another name of one (alias_of). A flag that takes a value always takes the next argument, even one that
// starts with '-' (so `--script -` means stdin). A flag given twice keeps
// every value (All) and answers Get with the last one.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "version.h"

namespace sci::tools {

struct FlagSpec {
  std::string_view name;        // without the leading "--"
  std::string_view value_name;  // e.g. "MS"; empty for a switch
  std::string_view help;
  // Non-empty: another name of that flag (an older one), stored under it.
  std::string_view alias_of = {};
};

class CommandLine {
 public:
  // Parses argv[1..]; false with *error on an unknown flag or a missing value.
  static bool Parse(std::span<const FlagSpec> specs, int argc, char** argv, CommandLine* out, std::string* error) {
    for (int i = 1; i < argc; ++i) {
      std::string_view arg = argv[i];
      // The short flags most tools accept: -h, and -v / -V for the version.
      if (arg == "-h") arg = "--help";
      if (arg == "-v" || arg == "-V") arg = "--version";
      if (arg.substr(0, 2) != "--" || arg.size() == 2) {
        *error = absl::StrFormat("unexpected argument \"%s\" (flags start with --)", arg);
        return false;
      }
      arg.remove_prefix(2);
      std::string_view name = arg, value;
      bool has_value = false;
      if (const size_t eq = arg.find('='); eq != std::string_view::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        has_value = true;
      }
      const FlagSpec* spec = Find(specs, name);
      if (spec == nullptr) {
        *error = absl::StrFormat("unknown flag --%s (see --help)", name);
        return false;
      }
      if (spec->value_name.empty()) {
        if (has_value) {
          *error = absl::StrFormat("--%s takes no value", name);
          return false;
        }
      } else if (!has_value) {
        if (i + 1 >= argc) {
          *error = absl::StrFormat("--%s needs a value (%s)", name, spec->value_name);
          return false;
        }
        value = argv[++i];
      }
      out->values_[std::string(spec->alias_of.empty() ? name : spec->alias_of)].emplace_back(value);
    }
    return true;
  }

  bool Has(std::string_view name) const { return values_.find(std::string(name)) != values_.end(); }

  std::string Get(std::string_view name, std::string_view fallback = {}) const {
    auto it = values_.find(std::string(name));
    return it == values_.end() ? std::string(fallback) : it->second.back();
  }

  std::vector<std::string> All(std::string_view name) const {
    auto it = values_.find(std::string(name));
    return it == values_.end() ? std::vector<std::string>{} : it->second;
  }

  // An unsigned decimal flag no larger than `max`; false with *error if malformed.
  bool GetUint(std::string_view name, uint64_t fallback, uint64_t max, uint64_t* out, std::string* error) const {
    *out = fallback;
    if (!Has(name)) return true;
    const std::string text = Get(name);
    uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty() || value > max) {
      *error = absl::StrFormat("--%s \"%s\" is not a whole number from 0 to %d", name, text, max);
      return false;
    }
    *out = value;
    return true;
  }

  bool GetInt(std::string_view name, int64_t fallback, int64_t min, int64_t max, int64_t* out,
              std::string* error) const {
    *out = fallback;
    if (!Has(name)) return true;
    const std::string text = Get(name);
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty() || value < min || value > max) {
      *error = absl::StrFormat("--%s \"%s\" is not a whole number from %d to %d", name, text, min, max);
      return false;
    }
    *out = value;
    return true;
  }

  bool GetDouble(std::string_view name, double fallback, double* out, std::string* error) const {
    *out = fallback;
    if (!Has(name)) return true;
    const std::string text = Get(name);
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty() || !(value >= 0)) {
      *error = absl::StrFormat("--%s \"%s\" is not a non-negative number", name, text);
      return false;
    }
    *out = value;
    return true;
  }

 private:
  static const FlagSpec* Find(std::span<const FlagSpec> specs, std::string_view name) {
    for (const FlagSpec& spec : specs) {
      if (spec.name == name) return &spec;
    }
    return nullptr;
  }

  std::map<std::string, std::vector<std::string>> values_;
};

// The flag table as help text, one flag per line, aligned.
inline std::string FlagHelp(std::span<const FlagSpec> specs) {
  std::vector<std::string> left;
  size_t width = 0;
  for (const FlagSpec& spec : specs) {
    left.push_back(spec.value_name.empty() ? absl::StrFormat("  --%s", spec.name)
                                           : absl::StrFormat("  --%s %s", spec.name, spec.value_name));
    width = std::max(width, left.back().size());
  }
  std::string text;
  for (size_t i = 0; i < specs.size(); ++i) {
    absl::StrAppendFormat(&text, "%-*s%s\n", static_cast<int>(width + 2), left[i], specs[i].help);
  }
  return text;
}

// The flags every tool has, in its flag table: --help (also -h) and --version.
inline constexpr FlagSpec kHelpFlag{"help", "", "print this help and exit (also -h)"};
inline constexpr FlagSpec kVersionFlag{"version", "", "print the tool's name and the library version, and exit (also -v, -V)"};

// Answers --help (usage, then the flag table) or --version on stdout. True if
// it did: the tool then exits 0.
inline bool PrintedHelpOrVersion(const CommandLine& flags, std::string_view tool, std::string_view usage,
                                 std::span<const FlagSpec> specs) {
  if (flags.Has(kHelpFlag.name)) {
    std::fprintf(stdout, "%.*s%s", static_cast<int>(usage.size()), usage.data(), FlagHelp(specs).c_str());
    return true;
  }
  if (flags.Has(kVersionFlag.name)) {
    std::fprintf(stdout, "%.*s %s\n", static_cast<int>(tool.size()), tool.data(), SCI_VERSION_STRING);
    return true;
  }
  return false;
}

}  // namespace sci::tools
