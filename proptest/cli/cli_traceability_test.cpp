// The traceability table from one source (verification/traceability/): the tags are read from C++ and
// Python tests as their reports name them, the docs sections that name each ID are found, and the
// generated tables say what is missing (CLI-3).

#include "support/requirement.hpp"

#include <traceability.hpp>

#include <pfx/cli/audit_table.hpp>

#include <rapidcheck.h>

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using pfx::traceability::Tag;

/// A test as a generated file declares it: tagged by PFX_PROPERTY, by verifies() in a TEST, or not.
struct Declared {
  std::string suite;
  std::string name;
  std::vector<std::string> ids;
  int kind = 0;  ///< 0: TEST with verifies, 1: PFX_PROPERTY (its arguments on several lines), 2: TEST, no tag
};

rc::Gen<std::string> identifier() {
  return rc::gen::map(rc::gen::pair(rc::gen::elementOf(std::string("ABCDEFGHIJKLMNOPQRSTUVWXYZ")),
                                    rc::gen::container<std::string>(rc::gen::elementOf(std::string("abcxyz019")))),
                      [](const std::pair<char, std::string>& p) { return p.first + p.second; });
}

rc::Gen<std::vector<std::string>> ids() {
  return rc::gen::nonEmpty(rc::gen::container<std::vector<std::string>>(
      rc::gen::elementOf(std::vector<std::string>{"INV-1", "INV-10", "CLI-3", "THM-1", "AUDIT-253", "NEW-7"})));
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

}  // namespace

PFX_PROPERTY(Traceability, CppTagsAreReadAsTheTestsRecordThem, "CLI-3", ()) {
  const auto tests = *rc::gen::container<std::vector<Declared>>(rc::gen::build<Declared>(
      rc::gen::set(&Declared::suite, identifier()), rc::gen::set(&Declared::name, identifier()),
      rc::gen::set(&Declared::ids, ids()), rc::gen::set(&Declared::kind, rc::gen::inRange(0, 3))));
  std::string text = "// TEST(Not, ATest) in a comment\n#include \"support/requirement.hpp\"\n\n";
  std::vector<std::string> expected;
  for (const Declared& t : tests) {
    if (t.kind == 1) {
      text += "PFX_PROPERTY(" + t.suite + ", " + t.name + ",\n             \"" + joined(t.ids) + "\", ()) {\n  RC_ASSERT(true);\n}\n";
    } else {
      text += "TEST(" + t.suite + ", " + t.name + ") {\n  const int x = 1;\n";
      if (t.kind == 0) text += "  pfx::test::verifies(\"" + joined(t.ids) + "\");\n";
      text += "  EXPECT_EQ(x, 1);\n}\n\n";
    }
    if (t.kind != 2) expected.push_back(t.suite + "." + t.name + "=" + joined(t.ids));
  }
  std::vector<std::string> read;
  for (const Tag& tag : pfx::traceability::cpp_tags(text, "x_test.cpp")) read.push_back(tag.test + "=" + joined(tag.ids));
  RC_ASSERT(read == expected);
}

PFX_PROPERTY(Traceability, PythonTagsAreNamedAsRunTestsReportsThem, "CLI-3", ()) {
  const auto tests = *rc::gen::container<std::vector<Declared>>(rc::gen::build<Declared>(
      rc::gen::set(&Declared::suite, identifier()), rc::gen::set(&Declared::ids, ids()),
      rc::gen::set(&Declared::kind, rc::gen::inRange(0, 2))));
  std::string text = "import unittest\n\nfrom support import verifies\n\n\nclass Model:\n    def step(self):\n        pass\n";
  std::vector<std::string> expected;
  for (std::size_t i = 0; i < tests.size(); ++i) {
    const Declared& t = tests[i];
    text += "\n\nclass " + t.suite + "(unittest.TestCase):\n";
    if (t.kind == 0) text += "    @verifies(\"" + joined(t.ids) + "\")\n";
    text += "    def test_reads_case_" + std::to_string(i) + "_of_the_seed(self):\n        self.assertTrue(True)\n";
    if (t.kind == 0) expected.push_back(t.suite + ".ReadsCase" + std::to_string(i) + "OfTheSeed=" + joined(t.ids));
  }
  std::vector<std::string> read;
  for (const Tag& tag : pfx::traceability::python_tags(text, "test_x.py")) read.push_back(tag.test + "=" + joined(tag.ids));
  RC_ASSERT(read == expected);
}

TEST(Traceability, TheDocsSectionsThatNameEachIdAreFoundOutsideCode) {
  pfx::test::verifies("CLI-3");
  const std::vector<pfx::traceability::Doc> docs = {
      {"docs/spec.md",
       "# Spec\n\n## The rule\n\nNeither INV-10 nor INV-1..5 counts here.\n\n"
       "```cpp\n# not a heading: INV-1\n```\n\n## What INV-1 keeps\n\nText.\n\n## Later\n\nAgain INV-1.\n"},
      {"docs/cli.md", "INV-1 before any heading.\n"}};
  EXPECT_EQ(pfx::traceability::sections_naming("INV-1", docs),
            (std::vector<std::string>{"docs/spec.md#what-inv-1-keeps", "docs/spec.md#later", "docs/cli.md"}));
  EXPECT_EQ(pfx::traceability::sections_naming("INV-10", docs), std::vector<std::string>{"docs/spec.md#the-rule"});
  EXPECT_TRUE(pfx::traceability::sections_naming("INV-5", docs).empty());
}

TEST(Traceability, EachRowListsTheTestsOfItsIdAndSaysWhatIsMissing) {
  pfx::test::verifies("CLI-3");
  const auto notes = pfx::traceability::read_notes(
      "# a comment\nID: INV-1\nenforced: `decide` (the `lcp` bound)<br>`common_prefix`\nproofs: the proof\n\n"
      "ID: INV-2\nenforced: `decide`\nevidence: ctests `x`\nproofs: none\n");
  ASSERT_EQ(notes.size(), 2U);
  EXPECT_EQ(notes.at("INV-2").evidence, "ctests `x`");
  const std::vector<Tag> tags = {{"Rule.A", {"INV-1", "INV-2"}, "a:1"}, {"Rule.B", {"INV-2"}, "a:9"}};
  const std::vector<pfx::traceability::Requirement> requirements = {
      {"INV-1", "one"}, {"INV-2", "two"}, {"INV-3", "three"}};
  const std::string table = pfx::traceability::requirements_table(requirements, notes, tags);
  EXPECT_NE(table.find("| INV-1 | one | `decide` (the `lcp` bound)<br>`common_prefix` | `Rule.A` | the proof |\n"),
            std::string::npos) << table;
  EXPECT_NE(table.find("| INV-2 | two | `decide` | `Rule.A`<br>`Rule.B`; ctests `x` | none |\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("| INV-3 | three | **no entry in `verification/traceability/enforcement.txt`** | **no test** |  |\n"),
            std::string::npos) << table;
  EXPECT_EQ(pfx::traceability::test_index(tags),
            "| test | IDs it records |\n|---|---|\n| `Rule.A` | INV-1 INV-2 |\n| `Rule.B` | INV-2 |\n");
  EXPECT_EQ(pfx::traceability::index_lines(tags), "Rule.A\tINV-1 INV-2\nRule.B\tINV-2\n");
  const std::string traced = pfx::traceability::traced_json(requirements, notes, tags, {});
  EXPECT_NE(traced.find(R"({"id": "INV-1", "has_row": true, "enforced_in_core": "decide (the lcp bound); common_prefix", )"
                        R"("tests": ["Rule.A"], "docs": []})"),
            std::string::npos) << traced;
  EXPECT_NE(traced.find(R"({"id": "INV-3", "has_row": false, "enforced_in_core": "", "tests": [], "docs": []})"),
            std::string::npos) << traced;
  EXPECT_NE(traced.find(R"("tests": ["Rule.A", "Rule.B"])"), std::string::npos) << traced;

  for (const char* bad : {"enforced: before any ID\n", "ID: INV-1\nwhere: nowhere\n", "ID: INV-1\nID: INV-1\n"}) {
    EXPECT_THROW((void)pfx::traceability::read_notes(bad), std::runtime_error) << bad;
  }
}

// The table the generator writes is the one `pfx audit --traceability` reads: every row, field for
// field, with quotes, backslashes and control characters in the text (CLI-3).
TEST(Traceability, TheProgramReadsTheTableTheGeneratorWrites) {
  pfx::test::verifies("CLI-3");
  static_assert(pfx::traceability::traced_format == pfx::cli::traced_format);
  const auto notes = pfx::traceability::read_notes(
      "ID: INV-1\nenforced: `decide` \"quoted\" a\\b\tc<br>`common_prefix`\nproofs: p\n");
  const std::vector<Tag> tags = {{"Rule.A", {"INV-1", "INV-2"}, "a:1"}, {"Rule.B", {"INV-2"}, "a:9"}};
  const std::vector<pfx::traceability::Requirement> requirements = {{"INV-1", "one"}, {"INV-2", "two"}};
  const std::vector<pfx::traceability::Doc> docs = {{"docs/spec.md", "# The rule\nINV-2 holds.\n"}};
  const std::vector<pfx::cli::TracedRequirement> table =
      pfx::cli::parse_traced(pfx::traceability::traced_json(requirements, notes, tags, docs), "generated");
  ASSERT_EQ(table.size(), 2U);
  const pfx::cli::TracedRequirement& one = table[0];
  EXPECT_EQ(one.id, "INV-1");
  EXPECT_TRUE(one.has_row);
  EXPECT_EQ(one.enforced_in_core, "decide \"quoted\" a\\b\tc; common_prefix");
  EXPECT_EQ(one.tests, std::vector<std::string>{"Rule.A"});
  EXPECT_TRUE(one.docs.empty());
  const pfx::cli::TracedRequirement& two = table[1];
  EXPECT_EQ(two.id, "INV-2");
  EXPECT_FALSE(two.has_row);
  EXPECT_EQ(two.tests, (std::vector<std::string>{"Rule.A", "Rule.B"}));
  EXPECT_EQ(two.docs, std::vector<std::string>{"docs/spec.md#the-rule"});
}
