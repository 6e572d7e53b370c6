// Regressions for the sequences that once drove the protocol into a false record (issue 13), each
// reproduced with chunk 2 and keep_min 2. Every step runs on the machine and the reference model
// (refinement::step_both: same answer, same state, every invariant) and moves the ghost state; after each
// step SAFE is checked for every prompt the test asks about.

#include <pfx/refinement/bridge.hpp>
#include <pfx/refinement/describe.hpp>
#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/ghost.hpp>
#include "support/requirement.hpp"

#include <pfx/core.hpp>

#include <string>
#include <vector>

namespace {

using pfx::spec::Tokens;

/// A machine, the reference model and the ghost, driven together.
struct Lane {
  pfx::Machine machine;
  pfx::spec::State model;
  pfx::spec::Ghost ghost;
  std::vector<Tokens> asked;  ///< prompts whose offers SAFE is checked on after every step

  /// Applies `e`; returns the refusal's name ("none" when accepted).
  std::string apply(const pfx::spec::Event& e) {
    const pfx::refinement::Comparison c = pfx::refinement::step_both(machine, model, e);
    EXPECT_TRUE(c.ok()) << pfx::refinement::describe(e) << ": machine " << pfx::refinement::describe(c.machine)
                        << ", reference " << pfx::refinement::describe(c.reference) << ", violated '"
                        << c.violated << "'";
    pfx::spec::follow(ghost, e, c.machine.accepted());
    if (machine.phase() == pfx::Phase::idle) {
      for (const Tokens& p : asked) {
        const std::size_t offer = machine.query(p).decision.offset;
        EXPECT_TRUE(ghost.safe(p, offer)) << "SAFE fails after " << pfx::refinement::describe(e)
                                          << ": offset " << offer << " for " << pfx::refinement::describe(p);
      }
    }
    return std::string(c.machine.refusal);
  }

  std::size_t offer(const Tokens& p) const { return machine.query(p).decision.offset; }
};

/// chunk 2, keep_min 2; the request [1,2,3,4,5] served cold and committed with one generated token.
Lane served() {
  Lane lane;
  EXPECT_EQ(lane.apply(pfx::spec::Configure{{true, 2, 2}}), "none");
  EXPECT_EQ(lane.apply(pfx::spec::Begin{{1, 2, 3, 4, 5}, 0}), "none");
  EXPECT_EQ(lane.apply(pfx::spec::Commit{{1, 2, 3, 4, 5, 9}, 5}), "none");
  return lane;
}

}  // namespace

TEST(FalseRecord, CommitRefusesIdsThatDifferFromTheBegunPromptPastTheOffset) {
  pfx::test::verifies("INV-11 SAFE INV-10");
  Lane lane = served();
  const Tokens prompt = {1, 2, 3, 4, 7, 7, 7};
  const Tokens other = {1, 2, 3, 4, 8, 8, 8, 0};
  lane.asked = {prompt, other, {1, 2, 3, 4, 8, 8, 8, 0, 5}};
  ASSERT_EQ(lane.offer(prompt), 4U);
  EXPECT_EQ(lane.apply(pfx::spec::Begin{prompt, 4}), "none");
  const pfx::Machine writing = lane.machine;
  // The rows [4, 7) hold 7, 7, 7: ids that say 8, 8, 8 would make the next query reuse them for 8s.
  EXPECT_EQ(lane.apply(pfx::spec::Commit{other, 7}), "ids not begun prompt");
  EXPECT_EQ(lane.machine, writing);
  EXPECT_EQ(lane.apply(pfx::spec::Commit{{1, 2, 3, 4, 7, 7}, 6}), "ids not begun prompt");  // shorter
  EXPECT_EQ(lane.apply(pfx::spec::Commit{{1, 2, 3, 4, 7, 7, 7, 0}, 7}), "none");
  EXPECT_EQ(lane.offer({1, 2, 3, 4, 8, 8, 8, 0, 5}), 4U);  // only the rows both share
}

TEST(FalseRecord, CommitRefusesACanonicalEndPastTheBegunPrompt) {
  pfx::test::verifies("INV-11 SAFE AUDIT-260 INV-2");
  Lane lane = served();
  const Tokens prompt = {1, 2, 3, 4, 5, 9, 6};
  const Tokens answer = {1, 2, 3, 4, 5, 9, 6, 0, 1, 1};
  lane.asked = {prompt, {1, 2, 3, 4, 5, 9, 6, 0, 1, 1, 3}};
  EXPECT_EQ(lane.apply(pfx::spec::Begin{prompt, lane.offer(prompt)}), "none");
  // The original's audit 260 broken by a caller: rows 7..9 were written by decode.
  EXPECT_EQ(lane.apply(pfx::spec::Commit{answer, prompt.size() + 3}), "canonical_end past prompt");
  EXPECT_EQ(lane.apply(pfx::spec::Commit{answer, prompt.size() + 1}), "canonical_end past prompt");
  EXPECT_EQ(lane.apply(pfx::spec::Commit{answer, 3}), "none");  // smaller: conservative, accepted
  EXPECT_EQ(lane.machine.held().canonical_end, 3U);
  EXPECT_EQ(lane.offer({1, 2, 3, 4, 5, 9, 6, 0, 1, 1, 3}), 2U);
}

TEST(FalseRecord, AClearDuringAWriteMakesItsCommitStoreNothing) {
  pfx::test::verifies("INV-11 SAFE AUDIT-253");
  Lane lane = served();
  const Tokens prompt = {1, 2, 3, 4, 6, 6};
  lane.asked = {prompt, {1, 2, 3, 4, 6, 6, 0, 1}, {1, 2, 3, 4, 5}};
  EXPECT_EQ(lane.apply(pfx::spec::Begin{prompt, 4}), "none");
  EXPECT_EQ(lane.apply(pfx::spec::Clear{}), "none");
  EXPECT_TRUE(lane.machine.tainted());
  EXPECT_EQ(lane.apply(pfx::spec::Commit{{1, 2, 3, 4, 6, 6, 0}, 6}), "none");  // accepted ...
  EXPECT_TRUE(lane.machine.held().ids.empty());                                // ... stores nothing
  EXPECT_FALSE(lane.machine.tainted());
  EXPECT_EQ(lane.offer({1, 2, 3, 4, 6, 6, 0, 1}), 0U);
  // The next request starts clean: served cold, then reused.
  EXPECT_EQ(lane.apply(pfx::spec::Begin{prompt, 0}), "none");
  EXPECT_EQ(lane.apply(pfx::spec::Commit{prompt, 6}), "none");
  EXPECT_EQ(lane.offer({1, 2, 3, 4, 6, 6, 0, 1}), 6U);
}

TEST(FalseRecord, ACommitAfterAClearDuringItsWriteStillChecksItsArguments) {
  pfx::test::verifies("INV-11 INV-10");
  Lane lane = served();
  EXPECT_EQ(lane.apply(pfx::spec::Begin{{1, 2, 3, 4, 6, 6}, 4}), "none");
  EXPECT_EQ(lane.apply(pfx::spec::Clear{}), "none");
  EXPECT_EQ(lane.apply(pfx::spec::Commit{{1, 2, 3, 4, 0, 0}, 6}), "ids not begun prompt");
  EXPECT_EQ(lane.apply(pfx::spec::Commit{{1, 2, 3, 4, 6, 6, 1}, 7}), "canonical_end past prompt");
  EXPECT_EQ(lane.apply(pfx::spec::Abort{}), "none");
  EXPECT_TRUE(lane.machine.held().ids.empty());
}

TEST(FalseRecord, ANewChunkForgetsTheRecordWhoseRowsAreOnTheOldGrid) {
  pfx::test::verifies("INV-11 SAFE THM-1");
  Lane lane = served();
  const Tokens prompt = {1, 2, 3, 4, 5, 9, 0, 0};
  lane.asked = {prompt};
  ASSERT_EQ(lane.offer(prompt), 4U);
  EXPECT_EQ(lane.apply(pfx::spec::Configure{{true, 2, 2}}), "none");  // the same grid keeps it
  EXPECT_EQ(lane.offer(prompt), 4U);
  EXPECT_EQ(lane.apply(pfx::spec::Configure{{true, 2, 3}}), "none");
  EXPECT_TRUE(lane.machine.held().ids.empty());
  EXPECT_EQ(lane.offer(prompt), 0U);
  // The ghost agrees that rows [0, 3) are not what a prefill on the grid of 3 writes there.
  EXPECT_FALSE(lane.ghost.safe(prompt, 3));
}

TEST(FalseRecord, SafeCatchesEachFalseRecordTheOldProtocolAccepted) {
  pfx::test::verifies("SAFE");
  // The ghost alone, after each sequence: the offer the record would have made is not SAFE.
  {
    Lane lane = served();  // ids differ after the offset
    pfx::spec::follow(lane.ghost, pfx::spec::Begin{{1, 2, 3, 4, 7, 7, 7}, 4}, true);
    pfx::spec::follow(lane.ghost, pfx::spec::Commit{{1, 2, 3, 4, 8, 8, 8, 0}, 7}, true);
    EXPECT_FALSE(lane.ghost.safe({1, 2, 3, 4, 8, 8, 8, 0, 5}, 6));
    EXPECT_TRUE(lane.ghost.safe({1, 2, 3, 4, 7, 7, 7, 0, 5}, 6));
  }
  {
    Lane lane = served();  // canonical_end past the prompt: rows 5.. are decode rows
    EXPECT_FALSE(lane.ghost.safe({1, 2, 3, 4, 5, 9, 0, 0}, 6));
    EXPECT_TRUE(lane.ghost.safe({1, 2, 3, 4, 5, 9, 0, 0}, 4));
  }
  {
    Lane lane = served();  // clear during the write
    pfx::spec::follow(lane.ghost, pfx::spec::Begin{{1, 2, 3, 4, 6, 6}, 4}, true);
    pfx::spec::follow(lane.ghost, pfx::spec::Clear{}, true);
    pfx::spec::follow(lane.ghost, pfx::spec::Commit{{1, 2, 3, 4, 6, 6, 0}, 6}, true);
    EXPECT_FALSE(lane.ghost.safe({1, 2, 3, 4, 6, 6, 0, 1}, 2));
  }
  {
    Lane lane = served();  // a new grid
    pfx::spec::follow(lane.ghost, pfx::spec::Configure{{true, 2, 4}}, true);
    EXPECT_FALSE(lane.ghost.safe({1, 2, 3, 4, 5, 9, 0, 0}, 4));
  }
}

TEST(FalseRecord, TheInvariantsCheckContentsNotOnlySizes) {
  pfx::test::verifies("INV-11");
  // A commit step whose record is the right size but holds other tokens than the begun prompt.
  pfx::spec::State before;
  before.config = {true, 2, 2};
  before.ids = {1, 2, 3, 4};
  before.canonical_end = 4;
  before.writing = true;
  before.begin_offset = 4;
  before.begun = {1, 2, 3, 4, 7, 7, 7};
  pfx::spec::State after = before;
  after.writing = false;
  after.begin_offset = 0;
  after.begun = {};
  after.ids = {1, 2, 3, 4, 8, 8, 8, 0};
  after.canonical_end = 7;
  const pfx::spec::Event commit = pfx::spec::Commit{after.ids, 7};
  const pfx::spec::Output accepted{};
  EXPECT_EQ(pfx::spec::first_violation({before.config, before, commit, accepted, after}), "INV-11");
  after.ids = {1, 2, 3, 4, 7, 7, 7, 0};
  EXPECT_EQ(pfx::spec::first_violation({before.config, before, commit, accepted, after}), "");
  after.canonical_end = 8;  // past the prompt
  EXPECT_EQ(pfx::spec::first_violation({before.config, before, commit, accepted, after}), "INV-11");
}
