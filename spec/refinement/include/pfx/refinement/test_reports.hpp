#pragma once

/// \file
/// What the suite's reports say: every test case of every gtest-style XML report in a folder (the
/// C++ tests' and the Python suites' alike), with the requirement IDs it records ("verifies") and
/// whether it passed, failed or was skipped. Read by the requirements check and by `pfx audit
/// --results`, so that both count the same tests the same way.

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>

namespace pfx::refinement {

enum class TestOutcome { passed, failed, skipped };

struct TestReport {
  std::set<std::string> ids;  ///< the IDs it records it verifies (empty: it records none)
  TestOutcome outcome = TestOutcome::passed;
};

/// Suite.Name -> its report, from every *.xml file in `dir`. Throws std::runtime_error when `dir`
/// is not a folder or a report cannot be read.
[[nodiscard]] inline std::map<std::string, TestReport> read_test_reports(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir)) {
    throw std::runtime_error("no test reports in " + dir.string() + " (run the tests first)");
  }
  // <testcase name="X" ... classname="S"> ... </testcase>, or <testcase ... /> without a body.
  const std::regex testcase(R"re(<testcase ([^>]*?)(/>|>([\s\S]*?)</testcase>))re");
  const std::regex name(R"re((?:^|\s)name="([^"]*)")re");
  const std::regex classname(R"re(classname="([^"]*)")re");
  const std::regex skipped(R"re(result="skipped")re");
  const std::regex verifies(R"re(<property name="verifies" value="([^"]*)")re");
  std::map<std::string, TestReport> reports;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".xml") continue;
    std::ifstream in(entry.path());
    if (!in) throw std::runtime_error("cannot read the test report " + entry.path().string());
    std::stringstream text;
    text << in.rdbuf();
    const std::string xml = text.str();
    for (std::sregex_iterator it(xml.begin(), xml.end(), testcase), end; it != end; ++it) {
      const std::string attributes = (*it)[1].str();
      const std::string body = (*it)[3].str();
      std::smatch n;
      std::smatch c;
      if (!std::regex_search(attributes, n, name) || !std::regex_search(attributes, c, classname)) continue;
      TestReport report;
      std::smatch v;
      if (std::regex_search(body, v, verifies)) {
        std::istringstream words(v[1].str());
        for (std::string id; words >> id;) report.ids.insert(id);
      }
      if (std::regex_search(attributes, skipped) || body.find("<skipped") != std::string::npos) {
        report.outcome = TestOutcome::skipped;
      } else if (body.find("<failure") != std::string::npos || body.find("<error") != std::string::npos) {
        report.outcome = TestOutcome::failed;
      }
      reports[c[1].str() + "." + n[1].str()] = report;
    }
  }
  return reports;
}

}  // namespace pfx::refinement
