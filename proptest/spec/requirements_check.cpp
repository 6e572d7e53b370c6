// Fails when an invariant of the catalogue or another requirement (spec/requirements.hpp) has no
// test, or a test claims an ID neither knows. Reads the "verifies" properties that the tests
// recorded in their gtest XML reports. Given the index of the tests' tags too (generated with
// docs/traceability.md by verification/traceability/: "Suite.Name<TAB>ID ID" per line), it also fails
// when a test records other IDs than its tag names, or a tagged test never ran; and an ID whose
// every tagged test was skipped in this run is not verified here: it is reported SKIPPED, and the
// check exits 77 (skipped, never passed) when nothing failed.
//
//   pfx_requirements_check RESULTS_DIR [INDEX]

#include <pfx/refinement/test_reports.hpp>
#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/requirements.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <exception>
#include <map>
#include <set>
#include <stdexcept>
#include <sstream>
#include <string>

namespace {

/// ctest's SKIP_RETURN_CODE: some IDs were verified by no test that ran (all of theirs skipped).
constexpr int skipped_status = 77;

using Ids = std::set<std::string>;
using IdsByTest = std::map<std::string, Ids>;

std::string read(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Ids split(const std::string& words) {
  Ids ids;
  std::istringstream in(words);
  for (std::string id; in >> id;) ids.insert(id);
  return ids;
}

std::string join(const Ids& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : " ") + id;
  return out;
}

/// Suite.Name -> the IDs it records, from every report in `dir`. A failed test vouches for nothing.
IdsByTest recorded(const std::map<std::string, pfx::refinement::TestReport>& reports) {
  IdsByTest by_test;
  for (const auto& [test, report] : reports) {
    if (!report.ids.empty() && report.outcome != pfx::refinement::TestOutcome::failed) by_test[test] = report.ids;
  }
  return by_test;
}

/// Suite.Name of every test that was skipped (for example a CUDA test on a machine without a
/// device). A skipped test vouches for nothing.
std::set<std::string> skipped(const std::map<std::string, pfx::refinement::TestReport>& reports) {
  std::set<std::string> tests;
  for (const auto& [test, report] : reports) {
    if (report.outcome == pfx::refinement::TestOutcome::skipped) tests.insert(test);
  }
  return tests;
}

/// Suite.Name -> IDs, from the index of the tests' tags. Throws for a line without a tab.
IdsByTest documented(const std::filesystem::path& index) {
  if (!std::filesystem::is_regular_file(index)) throw std::runtime_error("no index " + index.string());
  IdsByTest by_test;
  std::istringstream lines(read(index));
  std::size_t number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    const std::size_t tab = line.find('\t');
    if (tab == std::string::npos) {
      throw std::runtime_error(index.string() + ":" + std::to_string(number) + ": expected Suite.Name<TAB>IDs");
    }
    by_test[line.substr(0, tab)] = split(line.substr(tab + 1));
  }
  return by_test;
}

/// The whole check; 0 when every requirement has a test (and the index matches), 1 when one has none
/// (or the index does not match), 77 when the only gap is IDs whose every test was skipped.
int check(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: pfx_requirements_check RESULTS_DIR [INDEX]\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  if (!std::filesystem::is_directory(dir)) {
    std::cerr << "pfx_requirements_check: no test reports in " << dir << " (run the tests first)\n";
    return 2;
  }

  Ids known;
  pfx::spec::for_each_invariant([&](const auto& inv) { known.insert(std::string(inv.id)); });
  for (const pfx::spec::Requirement& r : pfx::spec::requirements) known.insert(std::string(r.id));

  int problems = 0;
  const auto reports = pfx::refinement::read_test_reports(dir);
  const IdsByTest by_test = recorded(reports);
  const std::set<std::string> not_run = skipped(reports);
  std::map<std::string, Ids> tests_of;
  for (const auto& [test, ids] : by_test) {
    for (const std::string& id : ids) {
      if (known.count(id) == 0) {
        std::cerr << "FAIL " << test << " claims " << id << ", which no requirement has\n";
        ++problems;
      }
      if (not_run.count(test) == 0) tests_of[id].insert(test);  // a skipped test vouches for nothing
    }
  }
  // Per ID, the tagged tests this run skipped (a CUDA test without a device, a suite this build left
  // out): an ID with only such tests is not verified here, which is not the same as having no test.
  const IdsByTest in_doc = argc == 3 ? documented(argv[2]) : IdsByTest{};
  std::map<std::string, Ids> skipped_of;
  for (const auto& [test, ids] : in_doc) {
    for (const std::string& id : ids) {
      if (not_run.count(test) != 0) skipped_of[id].insert(test);
    }
  }
  std::size_t unverified = 0;
  for (const std::string& id : known) {
    const auto found = tests_of.find(id);
    if (found != tests_of.end()) {
      std::cout << id << ": " << found->second.size() << " tests\n";
    } else if (skipped_of.count(id) != 0) {
      std::cout << "SKIPPED " << id << ": every test of it was skipped in this run (" << join(skipped_of[id]) << ")\n";
      ++unverified;
    } else {
      std::cerr << "FAIL " << id << " has no test\n";
      ++problems;
    }
  }

  if (argc == 3) {
    for (const auto& [test, ids] : by_test) {
      const auto row = in_doc.find(test);
      if (row == in_doc.end()) {
        std::cerr << "FAIL " << test << " records " << join(ids) << ", but no tag of it is in " << argv[2] << "\n";
        ++problems;
      } else if (row->second != ids) {
        std::cerr << "FAIL " << argv[2] << " says the tag of " << test << " names " << join(row->second)
                  << ", but it records " << join(ids) << "\n";
        ++problems;
      }
    }
    for (const auto& [test, ids] : in_doc) {
      if (by_test.count(test) == 0 && not_run.count(test) != 0) {
        std::cout << "SKIPPED " << test << " (" << join(ids) << "): tagged, and skipped in this run\n";
      } else if (by_test.count(test) == 0) {
        std::cerr << "FAIL " << argv[2] << " lists " << test << ", which no report has (it did not run)\n";
        ++problems;
      }
    }
  }

  if (problems != 0) {
    std::cerr << problems << " requirement problem(s)\n";
    return 1;
  }
  if (unverified != 0) {  // reported skipped, never passed: these IDs were not verified in this run
    std::cout << unverified << " requirement(s) verified by no test that ran in this run\n";
    return skipped_status;
  }
  std::cout << "every requirement has a test" << (argc == 3 ? ", and the index matches" : "")
            << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return check(argc, argv);
  } catch (const std::exception& e) {  // an unreadable report or index: say which, not terminate()
    std::cerr << "pfx_requirements_check: " << e.what() << "\n";
    return 2;
  }
}
