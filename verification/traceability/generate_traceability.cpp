// Writes the traceability table from one source (traceability.hpp): docs/traceability.md from its
// template, the index the requirements check compares the test reports with, and the table
// `pfx audit --traceability` reads at run time (traced.json). Run by the tests' build
// (verification/traceability/CMakeLists.txt); the ctest docs.traceability_is_generated fails when the
// committed docs/traceability.md differs.
//
//   generate_traceability TEMPLATE NOTES DOCS_DIR OUT_DOC OUT_INDEX OUT_TRACED TEST_FILE...

#include "traceability.hpp"

#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/requirements.hpp>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace pfx::traceability;

std::string read(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Writes `text` to `path` unless it already holds it, so that what depends on it is not rebuilt.
void write(const fs::path& path, const std::string& text) {
  std::error_code ec;
  if (fs::exists(path, ec) && read(path) == text) return;
  fs::create_directories(path.parent_path());
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string replace(std::string text, const std::string& placeholder, const std::string& value) {
  const std::size_t at = text.find(placeholder);
  if (at == std::string::npos) throw std::runtime_error("the template has no " + placeholder);
  return text.replace(at, placeholder.size(), value);
}

int generate(int argc, char** argv) {
  if (argc < 8) {
    std::cerr << "usage: generate_traceability TEMPLATE NOTES DOCS_DIR OUT_DOC OUT_INDEX OUT_TRACED TEST_FILE...\n";
    return 2;
  }
  const fs::path out_doc = argv[4];
  std::vector<Requirement> requirements;
  pfx::spec::for_each_invariant([&](const auto& inv) {
    requirements.push_back({std::string(inv.id), std::string(inv.statement)});
  });
  for (const pfx::spec::Requirement& r : pfx::spec::requirements) {
    requirements.push_back({std::string(r.id), std::string(r.statement)});
  }
  const auto notes = read_notes(read(argv[2]));

  std::vector<fs::path> tests(argv + 7, argv + argc);
  std::sort(tests.begin(), tests.end());
  std::vector<Tag> tags;
  std::set<std::string> seen;
  for (const fs::path& file : tests) {
    const std::string text = read(file);
    const std::string name = file.filename().string();
    for (Tag& tag : file.extension() == ".py" ? python_tags(text, name) : cpp_tags(text, name)) {
      if (!seen.insert(tag.test).second) throw std::runtime_error(tag.where + ": a second test " + tag.test);
      tags.push_back(std::move(tag));
    }
  }

  std::vector<Doc> docs;
  std::vector<fs::path> doc_files;
  for (const auto& entry : fs::directory_iterator(argv[3])) {
    if (entry.path().extension() == ".md" && entry.path().filename() != out_doc.filename()) {
      doc_files.push_back(entry.path());
    }
  }
  std::sort(doc_files.begin(), doc_files.end());
  docs.reserve(doc_files.size());
  for (const fs::path& file : doc_files) docs.push_back({"docs/" + file.filename().string(), read(file)});

  std::string doc = read(argv[1]);
  doc = replace(doc, "@REQUIREMENTS_TABLE@\n", requirements_table(requirements, notes, tags));
  doc = replace(doc, "@TEST_INDEX@\n", test_index(tags));
  write(out_doc, doc);
  write(argv[5], index_lines(tags));
  write(argv[6], traced_json(requirements, notes, tags, docs));
  for (const auto& entry : notes) {
    const std::string& id = entry.first;
    const bool known = std::any_of(requirements.begin(), requirements.end(), [&](const Requirement& r) { return r.id == id; });
    if (!known) std::cerr << "generate_traceability: warning: enforcement.txt has a block for " << id << ", which no requirement has\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return generate(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "generate_traceability: " << e.what() << "\n";
    return 1;
  }
}
