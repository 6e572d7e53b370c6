// Fails when an invariant of the catalogue or another requirement (spec/requirements.hpp) has no
// test, or a test claims an ID neither knows. Reads the "verifies" properties that the tests recorded in their gtest XML reports.
//
//   pfx_requirements_check RESULTS_DIR

#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/requirements.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: pfx_requirements_check RESULTS_DIR (the gtest XML reports)\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  if (!std::filesystem::is_directory(dir)) {
    std::cerr << "pfx_requirements_check: no test reports in " << dir << " (run the tests first)\n";
    return 2;
  }

  std::set<std::string> known;
  pfx::spec::for_each_invariant([&](const auto& inv) { known.insert(std::string(inv.id)); });
  for (const pfx::spec::Requirement& r : pfx::spec::requirements) known.insert(std::string(r.id));

  // <testcase name="X" ... classname="S"> <properties> <property name="verifies" value="INV-1 ..."/>
  const std::regex testcase(
      R"re(<testcase name="([^"]*)"[^>]*classname="([^"]*)"[^>]*>\s*<properties>\s*<property name="verifies" value="([^"]*)")re");
  std::map<std::string, std::set<std::string>> tests_of;
  int problems = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".xml") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string xml = text.str();
    for (std::sregex_iterator it(xml.begin(), xml.end(), testcase), end; it != end; ++it) {
      const std::string test = (*it)[2].str() + "." + (*it)[1].str();
      std::istringstream ids((*it)[3].str());
      for (std::string id; ids >> id;) {
        if (known.count(id) == 0) {
          std::cerr << "FAIL " << test << " claims " << id << ", which no requirement has\n";
          ++problems;
        }
        tests_of[id].insert(test);
      }
    }
  }

  for (const std::string& id : known) {
    const auto found = tests_of.find(id);
    if (found == tests_of.end()) {
      std::cerr << "FAIL " << id << " has no test\n";
      ++problems;
      continue;
    }
    std::cout << id << ": " << found->second.size() << " tests\n";
  }
  if (problems != 0) {
    std::cerr << problems << " requirement problem(s)\n";
    return 1;
  }
  std::cout << "every requirement has a test\n";
  return 0;
}
