#include "traceability.hpp"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <sstream>
#include <stdexcept>

namespace pfx::traceability {
namespace {

/// The parts, appended into one string (no temporary per `+`).
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::string text;
  (text.append(parts), ...);
  return text;
}

std::vector<std::string> words(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : std::string(separator)) + part;
  return out;
}

std::string_view trim(std::string_view s) {
  const std::size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

/// The lines of `text`, each with its number (from 1).
std::vector<std::pair<std::size_t, std::string_view>> numbered_lines(std::string_view text) {
  std::vector<std::pair<std::size_t, std::string_view>> lines;
  for (std::size_t number = 1; !text.empty(); ++number) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    lines.emplace_back(number, text.substr(0, end));
    text.remove_prefix(std::min(end + 1, text.size()));
  }
  return lines;
}

/// The first string literal at or after `at` in `text` ("" and npos when there is none).
std::pair<std::string, std::size_t> string_literal(std::string_view text, std::size_t at) {
  const std::size_t open = text.find('"', at);
  if (open == std::string_view::npos) return {"", std::string_view::npos};
  const std::size_t close = text.find('"', open + 1);
  if (close == std::string_view::npos) return {"", std::string_view::npos};
  return {std::string(text.substr(open + 1, close - open - 1)), close + 1};
}

/// "Suite.Name" from the text after "TEST(" or "PFX_PROPERTY(": "Suite, Name, ..." -> "Suite.Name".
std::string test_name(std::string_view arguments) {
  const std::size_t comma = arguments.find(',');
  const std::size_t end = arguments.find_first_of(",)", comma + 1);
  if (comma == std::string_view::npos || end == std::string_view::npos) return "";
  return std::string(trim(arguments.substr(0, comma))) + "." +
         std::string(trim(arguments.substr(comma + 1, end - comma - 1)));
}

std::size_t line_of(std::string_view text, std::size_t offset) {
  return 1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

/// test_answers_as_the_seed -> AnswersAsTheSeed: the C++ twin of proptest/support/test_names.py
/// `sentence`, which names the Python tests in their reports.
std::string sentence(std::string_view method) {
  method.remove_prefix(std::string_view("test_").size());
  std::string out;
  bool upper = true;
  for (const char c : method) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

/// Whether `line` names `id` itself: "INV-1" names INV-1, but "INV-10" and "INV-1..5" do not.
bool names(std::string_view line, std::string_view id) {
  for (std::size_t at = line.find(id); at != std::string_view::npos; at = line.find(id, at + 1)) {
    const bool starts =
        at == 0 || (std::isalnum(static_cast<unsigned char>(line[at - 1])) == 0 && line[at - 1] != '-');
    const std::string_view rest = line.substr(at + id.size());
    const bool ends =
        rest.empty() || (std::isalnum(static_cast<unsigned char>(rest.front())) == 0 && !rest.starts_with(".."));
    if (starts && ends) return true;
  }
  return false;
}

/// The anchor GitHub gives a heading: "What THM-1 requires" -> "what-thm-1-requires".
std::string anchor(std::string_view heading) {
  std::string out;
  for (const char c : heading) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 || c == '-' || c == '_') out += static_cast<char>(std::tolower(u));
    if (c == ' ') out += '-';
  }
  return out;
}

/// The tests whose tags name `id`, in the tags' order.
std::vector<std::string> tests_of(std::string_view id, std::span<const Tag> tags) {
  std::vector<std::string> tests;
  for (const Tag& tag : tags) {
    if (std::find(tag.ids.begin(), tag.ids.end(), id) != tag.ids.end()) tests.push_back(tag.test);
  }
  return tests;
}

/// `text` as a JSON string: quotes, backslashes and control characters escaped; other bytes, UTF-8
/// included, as they are.
std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      constexpr std::string_view hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[u >> 4U];
      out += hex[u & 0xfU];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::vector<Tag> cpp_tags(std::string_view text, std::string_view file) {
  // Each test starts at a line that begins with TEST( or PFX_PROPERTY(; a TEST's tag is the first
  // verifies("...") before the next test starts.
  struct Start {
    std::size_t offset;
    std::size_t arguments;
    bool property;
  };
  std::vector<Start> starts;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t newline = text.find('\n', at);
    const std::string_view line = text.substr(at, newline == std::string_view::npos ? newline : newline - at);
    for (const std::string_view macro : {std::string_view("TEST("), std::string_view("PFX_PROPERTY(")}) {
      if (line.starts_with(macro)) starts.push_back({at, at + macro.size(), macro.starts_with("PFX")});
    }
    at = newline == std::string_view::npos ? text.size() : newline + 1;
  }
  std::vector<Tag> tags;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::size_t end = i + 1 < starts.size() ? starts[i + 1].offset : text.size();
    const std::string_view body = text.substr(0, end);
    const std::string where = std::string(file) + ":" + std::to_string(line_of(text, starts[i].offset));
    const std::string name = test_name(body.substr(starts[i].arguments));
    if (name.empty()) throw std::runtime_error(where + ": cannot read the test's suite and name");
    std::size_t from = starts[i].arguments;
    if (!starts[i].property) {
      from = body.find("verifies(\"", starts[i].arguments);
      if (from == std::string_view::npos) continue;  // a test without a tag traces nothing
    }
    const auto [ids, after] = string_literal(body, from);
    if (after == std::string_view::npos) throw std::runtime_error(concat(where, ": ", name, " has no IDs in its tag"));
    tags.push_back({name, words(ids), where});
  }
  return tags;
}

std::vector<Tag> python_tags(std::string_view text, std::string_view file) {
  std::vector<Tag> tags;
  std::string suite;
  std::string pending;  // the IDs of a @verifies that waits for its def
  std::string pending_where;
  for (const auto& [number, raw] : numbered_lines(text)) {
    const std::string_view line = trim(raw);
    if (raw.starts_with("class ")) {
      suite = std::string(line.substr(6, line.find_first_of("(:") - 6));
    } else if (line.starts_with("@verifies(")) {
      pending = string_literal(line, 0).first;
      pending_where = std::string(file) + ":" + std::to_string(number);
    } else if (line.starts_with("def test_") && !pending_where.empty()) {
      const std::string_view method = line.substr(4, line.find('(') - 4);
      tags.push_back({suite + "." + sentence(method), words(pending), pending_where});
      pending_where.clear();
    }
  }
  return tags;
}

std::vector<std::string> sections_naming(std::string_view id, std::span<const Doc> docs) {
  std::vector<std::string> found;
  for (const Doc& doc : docs) {
    std::string heading;
    bool in_code = false;
    for (const auto& [number, line] : numbered_lines(doc.text)) {
      if (line.starts_with("```")) {
        in_code = !in_code;
        continue;
      }
      if (in_code) continue;
      if (line.starts_with("#")) {  // a heading is a line of its own section
        const std::size_t start = line.find_first_not_of("# ");
        heading = start == std::string_view::npos ? "" : std::string(line.substr(start));
      }
      if (!names(line, id)) continue;
      const std::string where = heading.empty() ? doc.path : doc.path + "#" + anchor(heading);
      if (std::find(found.begin(), found.end(), where) == found.end()) found.push_back(where);
    }
  }
  return found;
}

std::map<std::string, Note, std::less<>> read_notes(std::string_view text) {
  std::map<std::string, Note, std::less<>> notes;
  Note* note = nullptr;
  for (const auto& [number, raw] : numbered_lines(text)) {
    const std::string_view line = trim(raw);
    if (line.empty() || line.starts_with("#")) continue;
    const std::size_t colon = line.find(": ");
    const std::string_view key = line.substr(0, colon);
    const std::string value(colon == std::string_view::npos ? "" : trim(line.substr(colon + 2)));
    const std::string where = "enforcement.txt:" + std::to_string(number);
    if (key == "ID") {
      if (notes.count(value) != 0) throw std::runtime_error(concat(where, ": ", value, " has a second block"));
      note = &notes[value];
    } else if (note == nullptr || colon == std::string_view::npos) {
      throw std::runtime_error(where + ": expected \"ID: X\" first, then \"enforced:\", \"evidence:\", \"proofs:\"");
    } else if (key == "enforced") {
      note->enforced = value;
    } else if (key == "evidence") {
      note->evidence = value;
    } else if (key == "proofs") {
      note->proofs = value;
    } else {
      throw std::runtime_error(where + ": unknown field \"" + std::string(key) + "\"");
    }
  }
  return notes;
}

std::string requirements_table(std::span<const Requirement> requirements,
                               const std::map<std::string, Note, std::less<>>& notes, std::span<const Tag> tags) {
  std::string out = "| ID | requirement | enforced in core | tests | compile-time proofs |\n|---|---|---|---|---|\n";
  for (const Requirement& r : requirements) {
    const auto note = notes.find(r.id);
    std::vector<std::string> tests;
    for (const std::string& test : tests_of(r.id, tags)) tests.push_back("`" + test + "`");
    std::string tested = tests.empty() ? "**no test**" : join(tests, "<br>");
    if (note != notes.end() && !note->second.evidence.empty()) tested += "; " + note->second.evidence;
    out += "| " + r.id + " | " + r.statement + " | " +
           (note == notes.end() ? "**no entry in `verification/traceability/enforcement.txt`**" : note->second.enforced) +
           " | " + tested + " | " + (note == notes.end() ? "" : note->second.proofs) + " |\n";
  }
  return out;
}

std::string test_index(std::span<const Tag> tags) {
  std::string out = "| test | IDs it records |\n|---|---|\n";
  for (const Tag& tag : tags) out += "| `" + tag.test + "` | " + join(tag.ids, " ") + " |\n";
  return out;
}

std::string index_lines(std::span<const Tag> tags) {
  std::string out;
  for (const Tag& tag : tags) out += tag.test + "\t" + join(tag.ids, " ") + "\n";
  return out;
}

std::string plain(std::string_view cell) {
  std::string out;
  while (!cell.empty()) {
    if (cell.starts_with("<br>")) {
      out += "; ";
      cell.remove_prefix(4);
      continue;
    }
    if (cell.front() != '`') out += cell.front();
    cell.remove_prefix(1);
  }
  return out;
}

std::string traced_json(std::span<const Requirement> requirements,
                        const std::map<std::string, Note, std::less<>>& notes, std::span<const Tag> tags,
                        std::span<const Doc> docs) {
  const auto list = [](const std::vector<std::string>& items) {
    std::vector<std::string> strings;
    strings.reserve(items.size());
    for (const std::string& item : items) strings.push_back(json_string(item));
    return concat("[", join(strings, ", "), "]");
  };
  std::vector<std::string> rows;
  rows.reserve(requirements.size());
  for (const Requirement& r : requirements) {
    const auto note = notes.find(r.id);
    rows.push_back(concat("    {\"id\": ", json_string(r.id), ", \"has_row\": ", note == notes.end() ? "false" : "true",
                          ", \"enforced_in_core\": ", json_string(note == notes.end() ? "" : plain(note->second.enforced)),
                          ", \"tests\": ", list(tests_of(r.id, tags)), ", \"docs\": ", list(sections_naming(r.id, docs)),
                          "}"));
  }
  return concat("{\n  \"format\": ", json_string(traced_format), ",\n  \"requirements\": [\n", join(rows, ",\n"),
                rows.empty() ? "" : "\n", "  ]\n}\n");
}

}  // namespace pfx::traceability
