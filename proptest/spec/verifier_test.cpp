// The verifier is verified: each judgment the spec makes (SAFE, each transition of the ghost state,
// the reference protocol, the model checker's search) is shown to fail on something known to be
// wrong. SAFE and the ghost are checked on states built by hand; then every machine of the catalogue
// of wrong machines (proptest/support/wrong_machines.hpp) must be caught by the model checker and by
// the random-run properties (proptest/support/judged_run.hpp), each by the judgments the catalogue
// names, with the counterexample printed; core's Machine passes the same properties. The wrong
// machines' properties are meant to fail, so RapidCheck's closing note that some properties failed
// (with an RC_PARAMS to reproduce them) refers to those; the gtest verdict is what counts.

#include <pfx/refinement/describe.hpp>
#include <pfx/refinement/model_checker.hpp>
#include "support/judged_run.hpp"
#include "support/requirement.hpp"
#include "support/wrong_machines.hpp"

#include <pfx/spec/ghost.hpp>
#include <pfx/spec/model.hpp>

#include <cstddef>
#include <iostream>
#include <string>
#include <vector>

namespace {

using pfx::spec::Ghost;
using pfx::spec::Origin;
using pfx::spec::Row;
using pfx::spec::Tokens;

/// The ghost after a sequence of accepted events, from the initial state.
Ghost after(const std::vector<pfx::spec::Event>& events) {
  Ghost g;
  for (const pfx::spec::Event& e : events) pfx::spec::follow(g, e, true);
  return g;
}

/// The largest offset SAFE allows for `prompt`, by asking safe() of every candidate.
std::size_t safe_up_to(const Ghost& g, const Tokens& prompt) {
  std::size_t n = 0;
  while (n < prompt.size() && g.safe(prompt, n + 1)) ++n;
  return n;
}

void print(const std::string& title, const pfx::refinement::Finding& f) {
  std::cout << "  " << title << ": " << f.count << " failed";
  if (f.count != 0) {
    std::cout << ", first " << f.what << " after:";
    for (const pfx::spec::Event& e : f.path) std::cout << "\n      " << pfx::refinement::describe(e);
  }
  std::cout << "\n";
}

/// A domain small enough to search for each wrong machine in a fraction of a second, large enough
/// for every mistake of the catalogue: two requests (one to hold, one to write over it), prompts of
/// 3 tokens, chunks 1 and 2.
constexpr pfx::refinement::ModelDomain wrong_machine_domain{2, 3, 1, 2, 1, 2};

/// The model checker catches `M` by exactly the judgments the catalogue names for it.
template <class M>
void checker_catches() {
  const pfx::refinement::ModelReport r = pfx::refinement::check_model<M>(wrong_machine_domain);
  std::cout << "model checker on the wrong machine that " << M::name << ": " << r.states << " states, "
            << r.transitions << " transitions\n";
  print("SAFE", r.safe);
  print("reference", r.reference);
  print("invariants", r.invariant);
  EXPECT_EQ(r.safe.count != 0, M::caught_by.safe) << M::name;
  EXPECT_EQ(r.reference.count != 0, M::caught_by.reference) << M::name;
  EXPECT_EQ(r.invariant.count != 0, M::caught_by.invariant) << M::name;
  EXPECT_NE(r.failed, 0U);
}

/// The random-run property of `judgment` fails on `M` when the catalogue says it catches it (and
/// RapidCheck prints the shrunk run); SAFE passes on a machine the catalogue calls safe.
template <class M>
void properties_catch() {
  for (const pfx::test::Judgment j :
       {pfx::test::Judgment::safe, pfx::test::Judgment::reference, pfx::test::Judgment::invariant}) {
    const bool expected = j == pfx::test::Judgment::safe        ? M::caught_by.safe
                          : j == pfx::test::Judgment::reference ? M::caught_by.reference
                                                                : M::caught_by.invariant;
    if (!expected && j != pfx::test::Judgment::safe) continue;  // not claimed either way
    std::cout << "property " << pfx::test::name(j) << " on the wrong machine that " << M::name << ":\n";
    const bool passed = rc::check(std::string(pfx::test::name(j)) + " on " + std::string(M::name),
                                  [j] { pfx::test::judged_run<M>(j); });
    EXPECT_EQ(passed, !expected) << M::name << ": " << pfx::test::name(j)
                                 << (expected ? " did not catch it" : " refused a safe machine");
  }
}

template <class M>
void caught() {
  checker_catches<M>();
  properties_catch<M>();
}

}  // namespace

// ------------------------------------------------------------------------------------------- SAFE

TEST(Safe, JudgesEveryRowBelowTheOfferUpToTheLast) {
  pfx::test::verifies("SAFE");
  const Tokens p = {1, 0, 1, 1};
  Ghost g = after({pfx::spec::Record{p, 4}});
  EXPECT_TRUE(g.safe(p, 3));
  EXPECT_EQ(safe_up_to(g, p), 4U);
  // Only the last row below the offer is wrong: SAFE refuses that offer and allows the one below.
  for (std::size_t last = 0; last < p.size(); ++last) {
    Ghost h = g;
    h.rows[last] = Row{Origin::unusable};
    EXPECT_FALSE(h.safe(p, last + 1)) << "row " << last << " is unusable";
    EXPECT_TRUE(h.safe(p, last)) << "rows below " << last << " are cold";
  }
  // A decode row, a row of other tokens, a row not on a cold basis: each refused as the last row.
  const std::vector<Row> wrong_rows = {
      Row{Origin::decode, {1, 0, 1, 1}, 0, 0, 0, false},
      Row{Origin::prefill, {1, 0, 1, 0}, 3, 4, 1, true},
      Row{Origin::prefill, {1, 0, 1, 1}, 3, 4, 1, false},
  };
  for (const Row& r : wrong_rows) {
    Ghost h = g;
    h.rows[3] = r;
    EXPECT_FALSE(h.safe(p, 4));
    EXPECT_TRUE(h.safe(p, 3));
  }
}

TEST(Safe, RefusesARowComputedOnAnotherGridWhenRowsLieBelowItsChunk) {
  pfx::test::verifies("SAFE THM-1");
  // Rows [0, 2) a cold prefill of p on grid 2; row 2 the chunk [2, 3) with the same tokens, but
  // computed on grid 1: its start and end agree with the cold row's, its basis does not (rows below
  // a chunk are the grid's). SAFE compares the grid whenever rows lie below the chunk.
  const Tokens p = {0, 1, 1};
  Ghost g = after({pfx::spec::Configure{{true, 0, 2}}, pfx::spec::Record{p, 3}});
  ASSERT_EQ(g.grid, 2U);
  ASSERT_TRUE(g.safe(p, 3));
  g.rows[2].grid = 1;
  EXPECT_FALSE(g.safe(p, 3));
  EXPECT_TRUE(g.safe(p, 2));
  // The first chunk has no rows below it: its grid does not matter.
  Ghost h = after({pfx::spec::Configure{{true, 0, 4}}, pfx::spec::Record{p, 3}});
  h.rows[0].grid = h.rows[1].grid = h.rows[2].grid = 3;
  EXPECT_TRUE(h.safe(p, 3));
}

// ----------------------------------------------------------------------- the ghost's transitions

TEST(Ghost, AClearDuringAWriteMakesEverythingTheWriteWritesUnusableEvenFromRow0) {
  pfx::test::verifies("SAFE INV-11 AUDIT-253");
  const Tokens p = {1, 1, 0};
  const Ghost g = after({pfx::spec::Configure{{true, 0, 1}}, pfx::spec::Begin{p, 0}, pfx::spec::Clear{},
                         pfx::spec::Commit{{1, 1, 0, 1}, 3}});
  EXPECT_EQ(safe_up_to(g, p), 0U);
  EXPECT_EQ(safe_up_to(g, {1, 1, 0, 1, 0}), 0U);
  // Without the clear the same write is cold.
  const Ghost clean = after({pfx::spec::Configure{{true, 0, 1}}, pfx::spec::Begin{p, 0}, pfx::spec::Commit{{1, 1, 0, 1}, 3}});
  EXPECT_EQ(safe_up_to(clean, p), 3U);
}

TEST(Ghost, ABeginMakesTheRowsFromItsOffsetUnusableUntilItsCommit) {
  pfx::test::verifies("SAFE INV-8");
  const Tokens p = {0, 1, 0, 1};
  const Tokens q = {0, 1, 1, 1};
  const std::vector<pfx::spec::Event> held = {pfx::spec::Configure{{true, 0, 1}}, pfx::spec::Record{p, 4}};
  std::vector<pfx::spec::Event> aborted = held;
  aborted.push_back(pfx::spec::Begin{q, 2});
  aborted.push_back(pfx::spec::Abort{});
  EXPECT_EQ(safe_up_to(after(held), p), 4U);
  EXPECT_EQ(safe_up_to(after(aborted), p), 2U);  // rows 2.. may be half-written
  aborted.pop_back();
  EXPECT_EQ(safe_up_to(after(aborted), p), 2U);  // and while writing
}

TEST(Ghost, ACommitWritesTheBegunPromptsRowsAndDecodeRowsAfterThem) {
  pfx::test::verifies("SAFE INV-11 INV-2");
  const Tokens p = {0, 0, 1};
  const Ghost g = after({pfx::spec::Configure{{true, 0, 1}}, pfx::spec::Begin{p, 0}, pfx::spec::Commit{{0, 0, 1, 1}, 3}});
  EXPECT_EQ(safe_up_to(g, {0, 0, 1, 1, 0}), 3U);  // row 3 is decode's
  EXPECT_EQ(safe_up_to(g, {0, 0, 0, 1}), 2U);     // rows hold the begun prompt, not other tokens
  EXPECT_EQ(g.row(3).origin, Origin::decode);
}

TEST(Ghost, ARecordClaimsPrefillRowsOnlyBelowItsCanonicalEnd) {
  pfx::test::verifies("SAFE INV-2");
  const Tokens ids = {1, 0, 0, 1};
  const Ghost g = after({pfx::spec::Configure{{true, 0, 1}}, pfx::spec::Record{ids, 2}});
  EXPECT_EQ(safe_up_to(g, {1, 0, 0, 1, 1}), 2U);
  EXPECT_EQ(g.row(2).origin, Origin::decode);
}

TEST(Ghost, ANewGridMakesTheRowsOfTheOldOneOtherComputations) {
  pfx::test::verifies("SAFE THM-1");
  const Tokens p = {1, 0, 1, 0, 1};
  const Ghost g = after({pfx::spec::Configure{{true, 0, 1}}, pfx::spec::Record{p, 5}, pfx::spec::Configure{{true, 0, 2}}});
  EXPECT_EQ(g.grid, 2U);
  EXPECT_EQ(safe_up_to(g, p), 0U);
  const Ghost same = after({pfx::spec::Configure{{true, 0, 1}}, pfx::spec::Record{p, 5}, pfx::spec::Configure{{true, 3, 1}}});
  EXPECT_EQ(safe_up_to(same, p), 5U);
}

TEST(Ghost, OnAnEngineWhoseDecodeRowsAreExactACommitsDecodeRowsAndItsLastChunkAreCold) {
  pfx::test::verifies("SAFE INV-2");
  // Grid 2: the prompt's last chunk [2, 3) ends early, rows 3 and 4 are decode's. A cold prefill of
  // q computes row 2 in the chunk [2, 4): the same row only on an engine whose rows do not depend on
  // where their chunk ends, which an engine whose decode rows are exact is.
  const Tokens p = {0, 0, 1};
  const Tokens q = {0, 0, 1, 1, 0, 1};
  const pfx::spec::Config exact{true, 0, 2, 0, 0, true};
  const Ghost g = after({pfx::spec::Configure{exact}, pfx::spec::Begin{p, 0}, pfx::spec::Commit{{0, 0, 1, 1, 0}, 3}});
  EXPECT_EQ(g.row(3).origin, Origin::decode);
  EXPECT_TRUE(g.row(3).exact);
  EXPECT_EQ(safe_up_to(g, q), 5U);
  EXPECT_EQ(safe_up_to(g, {0, 0, 1, 0, 0, 1}), 3U);  // row 3 holds another token
  // Without the premise the same write is cold only in its full chunk.
  const Ghost inexact = after({pfx::spec::Configure{{true, 0, 2}}, pfx::spec::Begin{p, 0}, pfx::spec::Commit{{0, 0, 1, 1, 0}, 3}});
  EXPECT_EQ(safe_up_to(inexact, q), 2U);
  // A decode row on a basis that was not cold is not a cold prefill's row.
  Ghost h = g;
  h.rows[4].cold_basis = false;
  EXPECT_EQ(safe_up_to(h, q), 4U);
}

TEST(Ghost, ADecodeRowComputedOnRowsThatWereNotColdStaysSoWhenTheyAreReplaced) {
  pfx::test::verifies("SAFE INV-2");
  // A write from row 1 over a row 0 of other tokens (a begin no correct machine grants): its prefill
  // rows and the decode row 3 are computed on a basis that was not cold. Rows 0..2 replaced by hand
  // with a cold prefill's leave row 3 what it was computed from: SAFE still refuses it, premise or not.
  const Tokens q = {1, 1, 1, 1, 0};
  const pfx::spec::Config exact{true, 0, 1, 0, 0, true};
  Ghost g = after({pfx::spec::Configure{exact}, pfx::spec::Record{{0, 0}, 2}, pfx::spec::Begin{{1, 1, 1}, 1},
                   pfx::spec::Commit{{1, 1, 1, 1}, 3}});
  ASSERT_EQ(g.row(3).origin, Origin::decode);
  EXPECT_FALSE(g.row(3).cold_basis);
  for (std::size_t i = 0; i < 3; ++i) {
    Row cold = pfx::spec::cold_row(q, 1, i);
    cold.exact = true;
    g.rows[i] = cold;
  }
  EXPECT_EQ(safe_up_to(g, q), 3U);
}

TEST(Ghost, EachRowSaysWhetherItsWriterWroteDecodeRowsExactly) {
  pfx::test::verifies("SAFE INV-2 INV-11");
  const Tokens q = {1, 0, 1, 1, 0};
  const pfx::spec::Config exact{true, 0, 1, 0, 0, true};
  const pfx::spec::Config inexact{true, 0, 1};
  // Decode rows written before the premise held are not made exact by it.
  const Ghost before = after({pfx::spec::Configure{inexact}, pfx::spec::Record{q, 2}, pfx::spec::Configure{exact}});
  EXPECT_FALSE(before.row(2).exact);
  EXPECT_EQ(safe_up_to(before, q), 2U);
  // Rows written under it are no cold prefill's once the engine is not said to write them exactly.
  const Ghost under = after({pfx::spec::Configure{exact}, pfx::spec::Record{q, 2}});
  EXPECT_EQ(safe_up_to(under, q), 5U);
  const Ghost after_it = after({pfx::spec::Configure{exact}, pfx::spec::Record{q, 2}, pfx::spec::Configure{inexact}});
  EXPECT_EQ(safe_up_to(after_it, q), 2U);
}

// -------------------------------------------------------------------------- the wrong machines

namespace wrong = pfx::test::wrong;

TEST(WrongMachine, KeepsItsRecordAcrossAClearDuringAWriteFromRow0) {
  pfx::test::verifies("SAFE INV-11 AUDIT-253");
  caught<wrong::KeepsItsRecordAcrossAClearDuringAWriteFromRow0>();
}

TEST(WrongMachine, KeepsItsRecordAcrossANewGrid) {
  pfx::test::verifies("SAFE THM-1");
  caught<wrong::KeepsItsRecordAcrossANewGrid>();
}

TEST(WrongMachine, KeepsItsRecordAcrossAChangeOfDecodeRowsExact) {
  pfx::test::verifies("SAFE INV-2 INV-11");
  caught<wrong::KeepsItsRecordAcrossAChangeOfDecodeRowsExact>();
}

TEST(WrongMachine, OffersOneRowTooMany) {
  pfx::test::verifies("SAFE INV-1 INV-2");
  caught<wrong::OffersOneRowTooMany>();
}

TEST(WrongMachine, RepublishesAfterAnAbort) {
  pfx::test::verifies("SAFE INV-8");
  caught<wrong::RepublishesAfterAnAbort>();
}

TEST(WrongMachine, PublishesPastTheBegunPrompt) {
  pfx::test::verifies("SAFE INV-2 INV-11 AUDIT-260");
  caught<wrong::PublishesPastTheBegunPrompt>();
}

TEST(WrongMachine, PublishesIdsOtherThanTheBegunPrompt) {
  pfx::test::verifies("SAFE INV-11");
  caught<wrong::PublishesIdsOtherThanTheBegunPrompt>();
}

TEST(WrongMachine, RecordsDecodeRowsAsPrefill) {
  pfx::test::verifies("SAFE INV-2");
  caught<wrong::RecordsDecodeRowsAsPrefill>();
}

TEST(WrongMachine, NeverReusesIsSafeAndCaughtByTheReference) {
  pfx::test::verifies("INV-7");
  caught<wrong::NeverReuses>();
}

// ------------------------------------------------------------------------ core's Machine passes

PFX_PROPERTY(JudgedRun, CoreMachineIsSafeOnEveryRandomRun, "SAFE THM-1", ()) {
  pfx::test::judged_run<pfx::Machine>(pfx::test::Judgment::safe);
}

PFX_PROPERTY(JudgedRun, CoreMachineAgreesWithTheReferenceOnEveryRandomRun, "INV-10", ()) {
  pfx::test::judged_run<pfx::Machine>(pfx::test::Judgment::reference);
}

PFX_PROPERTY(JudgedRun, CoreMachineKeepsEveryInvariantOnEveryRandomRun, "INV-11", ()) {
  pfx::test::judged_run<pfx::Machine>(pfx::test::Judgment::invariant);
}

TEST(WrongMachine, CoreMachinePassesTheCheckerOnTheSameDomain) {
  pfx::test::verifies("SAFE");
  const pfx::refinement::ModelReport r = pfx::refinement::check_model(wrong_machine_domain);
  EXPECT_EQ(r.failed, 0U) << r.violation;
  EXPECT_GT(r.nonzero_offers, 0U);
}
