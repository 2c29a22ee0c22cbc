#include "publish_script.h"

#include "absl/strings/str_format.h"
#include "text.h"

namespace sci::tools {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes.
bool Unescape(std::string_view token, std::string* out, std::string* error) {
  out->clear();
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] != '%') {
      out->push_back(token[i]);
      continue;
    }
    const int hi = i + 1 < token.size() ? HexDigit(token[i + 1]) : -1;
    const int lo = i + 2 < token.size() ? HexDigit(token[i + 2]) : -1;
    if (hi < 0 || lo < 0) {
      *error = absl::StrFormat("bad escape in \"%s\" (write %%XX with two hex digits; %% itself is %%25)", token);
      return false;
    }
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

bool ParseCount(std::string_view text, uint64_t* out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

bool ParseEvent(bool stored, const std::vector<std::string_view>& tokens, ScriptEvent* event, std::string* error) {
  if (tokens.size() < 2) {
    *error = absl::StrFormat("%s needs an object key", tokens[0]);
    return false;
  }
  event->stored = stored;
  if (!Unescape(tokens[1], &event->object_key, error)) return false;
  if (event->object_key.empty()) {
    *error = "the object key is empty";
    return false;
  }
  for (size_t i = 2; i < tokens.size(); ++i) {
    const size_t eq = tokens[i].find('=');
    if (eq == std::string_view::npos) {
      *error = absl::StrFormat("expected name=value, got \"%s\"", tokens[i]);
      return false;
    }
    const std::string_view name = tokens[i].substr(0, eq);
    std::string value;
    if (!Unescape(tokens[i].substr(eq + 1), &value, error)) return false;
    if (name == "group") {
      event->group_id = std::move(value);
    } else if (name == "tenant") {
      event->tenant_id = std::move(value);
    } else if (name == "medium") {
      event->medium = std::move(value);
    } else if (name == "idx" && stored) {
      if (!ParseCount(value, &event->base_block_idx)) {
        *error = absl::StrFormat("idx \"%s\" is not a whole number", value);
        return false;
      }
    } else {
      *error = absl::StrFormat("unknown field \"%s\" (%s)", name,
                               stored ? "group, tenant, medium, idx" : "group, tenant, medium");
      return false;
    }
  }
  return true;
}

// `cleared [tenant=<t>]`: no key, no medium, no group (the publisher sends
// them nil).
bool ParseCleared(const std::vector<std::string_view>& tokens, ScriptEvent* event, std::string* error) {
  event->stored = false;
  event->cleared = true;
  event->medium.clear();
  for (size_t i = 1; i < tokens.size(); ++i) {
    constexpr std::string_view kTenant = "tenant=";
    if (tokens[i].substr(0, kTenant.size()) != kTenant) {
      *error = absl::StrFormat("cleared takes only tenant=<t>, got \"%s\"", tokens[i]);
      return false;
    }
    if (!Unescape(tokens[i].substr(kTenant.size()), &event->tenant_id, error)) return false;
  }
  return true;
}

bool ParseLine(std::string_view line, std::vector<ScriptCommand>* out, std::string* error) {
  if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
  const std::vector<std::string_view> tokens = Split(line, " \t\r\f\v", /*skip_empty=*/true);
  if (tokens.empty()) return true;
  ScriptCommand command;
  const std::string_view verb = tokens[0];
  if (verb == "stored" || verb == "removed") {
    command.kind = ScriptCommand::Kind::kEvent;
    if (!ParseEvent(verb == "stored", tokens, &command.event, error)) return false;
  } else if (verb == "cleared") {
    command.kind = ScriptCommand::Kind::kEvent;
    if (!ParseCleared(tokens, &command.event, error)) return false;
  } else if (verb == "flush") {
    command.kind = ScriptCommand::Kind::kFlush;
    if (tokens.size() > 1) {
      *error = "flush takes no argument";
      return false;
    }
  } else if (verb == "gap") {
    command.kind = ScriptCommand::Kind::kGap;
    command.count = 1;
    if (tokens.size() > 2 || (tokens.size() == 2 && (!ParseCount(tokens[1], &command.count) || command.count == 0))) {
      *error = "gap takes one optional count of at least 1";
      return false;
    }
  } else if (verb == "sleep") {
    command.kind = ScriptCommand::Kind::kSleep;
    if (tokens.size() != 2 || !ParseCount(tokens[1], &command.count)) {
      *error = "sleep takes milliseconds";
      return false;
    }
  } else {
    *error = absl::StrFormat("unknown command \"%s\" (stored, removed, cleared, flush, gap, sleep)", verb);
    return false;
  }
  out->push_back(std::move(command));
  return true;
}

}  // namespace

bool ParseScript(std::string_view text, std::vector<ScriptCommand>* out, std::string* error) {
  out->clear();
  int number = 0;
  for (std::string_view line : Split(text, "\n", /*skip_empty=*/false)) {
    ++number;
    std::string why;
    const size_t before = out->size();
    if (!ParseLine(line, out, &why)) {
      *error = absl::StrFormat("line %d: %s", number, why);
      return false;
    }
    if (out->size() > before) out->back().line = number;
  }
  return true;
}

}  // namespace sci::tools
