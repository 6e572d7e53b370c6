// Examples that pin documented behaviour: the refusal table, the reasons and bounds an operator sees,
// the deliberate differences from the seed, and the cost guarantees. Each constexpr body runs once in
// static_assert (a regression fails the build) and once at run time (coverage sees it).

#include "support/requirement.hpp"

#include <pfx/core.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

using pfx::Bound;
using pfx::Config;
using pfx::Machine;
using pfx::Reason;
using pfx::Refusal;
using Tokens = std::vector<pfx::token>;

/// 0, 1, 2, ... n-1.
constexpr Tokens iota(std::size_t n, pfx::token from = 0) {
  Tokens t;
  for (std::size_t i = 0; i < n; ++i) t.push_back(from + static_cast<pfx::token>(i));
  return t;
}

constexpr Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

constexpr Machine configured(Config c) {
  Machine m;
  (void)m.configure(c);
  return m;
}

/// Every refusal of docs/spec.md's table, each from a state where it applies; the machine's state
/// must be exactly as it was.
constexpr bool every_refusal_is_reported_and_changes_nothing() {
  bool ok = true;
  Machine m = configured({true, 2, 2});
  const Tokens held = iota(10);
  ok = ok && m.record(held, 8).accepted();
  const Machine idle = m;

  ok = ok && m.commit(held, 8).refusal == Refusal::not_writing && m == idle;
  ok = ok && m.abort().refusal == Refusal::not_writing && m == idle;
  ok = ok && m.record(held, 11).refusal == Refusal::canonical_end_past_ids && m == idle;
  ok = ok && m.configure({true, 2, 0}).refusal == Refusal::chunk_zero && m == idle;
  const Tokens prompt = concat(iota(10), {42});  // granted: align_down(min(10, 8, 10), 2) = 8
  ok = ok && m.query(prompt).decision.offset == 8;
  ok = ok && m.begin(prompt, 6).refusal == Refusal::offset_not_granted && m == idle;
  ok = ok && m.begin(prompt, 9).refusal == Refusal::offset_not_granted && m == idle;

  ok = ok && m.begin(prompt, 8).accepted();
  const Machine writing = m;
  ok = ok && m.query(prompt).refusal == Refusal::writing && m == writing;
  ok = ok && m.begin(prompt, 0).refusal == Refusal::writing && m == writing;
  ok = ok && m.record(prompt, 0).refusal == Refusal::writing && m == writing;
  ok = ok && m.configure({}).refusal == Refusal::writing && m == writing;
  const Tokens answer = concat(prompt, {7, 7});
  ok = ok && m.commit(answer, 14).refusal == Refusal::canonical_end_past_ids && m == writing;
  ok = ok && m.commit(answer, 12).refusal == Refusal::canonical_end_past_prompt && m == writing;
  Tokens broken = answer;
  broken[3] = 99;  // in the kept prefix
  ok = ok && m.commit(broken, 11).refusal == Refusal::ids_not_begun_prompt && m == writing;
  broken = answer;
  broken[10] = 43;  // past the offset: rows the engine computed from 42
  ok = ok && m.commit(broken, 11).refusal == Refusal::ids_not_begun_prompt && m == writing;
  ok = ok && m.commit(iota(10), 10).refusal == Refusal::ids_not_begun_prompt && m == writing;
  ok = ok && m.commit(iota(9, 1), 9).refusal == Refusal::ids_not_begun_prompt && m == writing;
  Machine conservative = m;  // a canonical_end below the prompt's length, even below the offset
  ok = ok && conservative.commit(answer, 7).accepted() && conservative.held().canonical_end == 7;
  ok = ok && m.commit(answer, 11).accepted();
  return ok;
}
static_assert(every_refusal_is_reported_and_changes_nothing());

TEST(Machine, EveryRefusalOfTheTableIsReportedAndChangesNothing) {
  pfx::test::verifies("INV-10 INV-9");
  EXPECT_TRUE(every_refusal_is_reported_and_changes_nothing());
}

/// The order of docs/spec.md's refusal table: for each event, a state and arguments where every one of
/// its refusals applies, then the same with the first cause removed, and so on. The first that
/// applies is reported, so swapping any two checks in core changes one of these answers.
constexpr bool refusals_are_checked_in_the_table_order() {
  bool ok = true;
  Machine m = configured({true, 2, 2});
  const Tokens held = iota(10);
  ok = ok && m.record(held, 8).accepted();
  const Tokens prompt = concat(iota(10), {42});  // granted: 8
  const Tokens foreign = {99};                   // not the begun prompt, shorter than any canonical_end below

  // Idle: commit's and abort's first refusal. Here commit's every later cause applies too, against the
  // prompt begun before (canonical_end 20 > len(ids) = 1 and > len(prompt) = 11; ids do not start with it).
  Machine after_abort = m;
  ok = ok && after_abort.begin(prompt, 8).accepted() && after_abort.abort().accepted();
  ok = ok && after_abort.commit(foreign, 20).refusal == Refusal::not_writing;
  ok = ok && after_abort.abort().refusal == Refusal::not_writing;
  // Idle: record's second refusal, configure's second, begin's second (its first needs a write).
  ok = ok && m.record(foreign, 20).refusal == Refusal::canonical_end_past_ids;
  ok = ok && m.configure({false, 0, 0}).refusal == Refusal::chunk_zero;
  ok = ok && m.begin(prompt, 6).refusal == Refusal::offset_not_granted;

  ok = ok && m.begin(prompt, 8).accepted();
  // Writing: the phase comes first for query, begin (with an offset that is not granted), record
  // (with canonical_end past its ids) and configure (with chunk 0).
  ok = ok && m.query(prompt).refusal == Refusal::writing;
  ok = ok && m.begin(prompt, 6).refusal == Refusal::writing;
  ok = ok && m.record(foreign, 20).refusal == Refusal::writing;
  ok = ok && m.configure({false, 0, 0}).refusal == Refusal::writing;
  // Writing: commit's three argument checks, each with every later cause still present.
  ok = ok && m.commit(foreign, 20).refusal == Refusal::canonical_end_past_ids;
  const Tokens long_foreign(20, 99);  // canonical_end 20 fits it, but it is not the prompt, and 20 > 11
  ok = ok && m.commit(long_foreign, 20).refusal == Refusal::ids_not_begun_prompt;
  ok = ok && m.commit(concat(prompt, iota(9)), 20).refusal == Refusal::canonical_end_past_prompt;
  ok = ok && m.commit(prompt, 11).accepted();
  return ok;
}
static_assert(refusals_are_checked_in_the_table_order());

TEST(Machine, RefusalsAreCheckedInTheTableOrder) {
  pfx::test::verifies("INV-10 INV-9");
  EXPECT_TRUE(refusals_are_checked_in_the_table_order());
}

/// begin shrinks the record at once; abort keeps the untouched prefix; commit publishes prompt +
/// generated with canonical_end = len(prompt).
constexpr bool begin_shrinks_abort_keeps_commit_publishes() {
  bool ok = true;
  Machine m = configured({true, 4, 1});
  const Tokens turn1 = iota(20);
  ok = ok && m.record(turn1, 16).accepted();
  const Tokens turn2 = concat(iota(12), {50, 51, 52});
  const pfx::Decision d = m.query(turn2).decision;
  ok = ok && d.offset == 12 && d.reason == Reason::reused && d.bound == Bound::common_prefix;
  ok = ok && m.begin(turn2, 12).accepted();
  ok = ok && m.held().ids == iota(12) && m.held().canonical_end == 12;  // INV-8 at once
  ok = ok && m.phase() == pfx::Phase::writing && m.begin_offset() == 12;
  Machine aborted = m;
  ok = ok && aborted.abort().accepted() && aborted.held().ids == iota(12);
  ok = ok && aborted.phase() == pfx::Phase::idle;
  const Tokens answer = concat(turn2, {60, 61});
  ok = ok && m.commit(answer, turn2.size()).accepted();
  ok = ok && m.held().ids == answer && m.held().canonical_end == turn2.size();
  return ok;
}
static_assert(begin_shrinks_abort_keeps_commit_publishes());

TEST(Machine, BeginShrinksTheRecordAbortKeepsThePrefixCommitPublishes) {
  pfx::test::verifies("INV-8");
  EXPECT_TRUE(begin_shrinks_abort_keeps_commit_publishes());
}

/// One example per reason and per bound, so that an operator can see why a prompt missed.
constexpr bool each_reason_and_bound_is_named() {
  bool ok = true;
  const Tokens held = iota(10);
  const Machine off = configured({false, 0, 1});
  ok = ok && off.query(held).decision.reason == Reason::disabled;
  const Machine empty = configured({true, 0, 1});
  ok = ok && empty.query(held).decision.reason == Reason::empty_record;

  Machine m = configured({true, 3, 4});
  ok = ok && m.record(held, 9).accepted();
  const auto ask = [&](const Tokens& p) { return m.query(p).decision; };
  const pfx::Decision diverged_at_0 = ask(iota(10, 1));
  ok = ok && diverged_at_0.reason == Reason::nothing_reusable &&
       diverged_at_0.bound == Bound::common_prefix && diverged_at_0.common_prefix == 0;
  const pfx::Decision short_lcp = ask(concat(iota(2), {77, 78}));
  ok = ok && short_lcp.reason == Reason::nothing_reusable && short_lcp.bound == Bound::alignment;
  const pfx::Decision lcp5 = ask(concat(iota(5), {77}));
  ok = ok && lcp5.offset == 4 && lcp5.bound == Bound::alignment && lcp5.common_prefix == 5;
  const pfx::Decision cut_by_end = ask(concat(held, {1}));  // min(10, 9, 10) = 9 -> 8
  ok = ok && cut_by_end.offset == 8 && cut_by_end.bound == Bound::alignment;

  Machine one = configured({true, 3, 1});
  ok = ok && one.record(held, 9).accepted();
  ok = ok && one.query(concat(held, {1})).decision.bound == Bound::canonical_end;
  ok = ok && one.query(iota(8)).decision.bound == Bound::one_token_left;
  ok = ok && one.query(iota(8)).decision.offset == 7;
  ok = ok && one.query(concat(iota(2), {9})).decision.reason == Reason::below_keep_min;
  ok = ok && one.query({}).decision.offset == 0;  // an empty prompt: nothing to prefill from
  return ok;
}
static_assert(each_reason_and_bound_is_named());

TEST(Machine, EachReasonAndBoundIsNamedOnAnExample) {
  pfx::test::verifies("INV-1 INV-2 INV-3 INV-4 INV-5 INV-6");
  EXPECT_TRUE(each_reason_and_bound_is_named());
  EXPECT_EQ(pfx::name(Reason::below_keep_min), "below keep_min");
  EXPECT_EQ(pfx::name(Bound::one_token_left), "one token left");
  EXPECT_EQ(pfx::describe(Refusal::chunk_zero), "chunk must be at least 1");
}

/// The prefill step (INV-12), on docs/engines.md's examples: with chunk 32 and steps of 256, a
/// 97-token prompt held whole is resumed at 64, not 96 (its cold run's last step holds 97 tokens,
/// a resume at 96 would compute its last token alone); a 257-token one at 256 (its cold run ends
/// with a step of one token too). keep_min judges the offset the step leaves.
constexpr bool prefill_step_is_named_and_keep_min_judged_after_it() {
  bool ok = true;
  const auto held_whole = [](const Config& c, std::size_t n) {
    Machine m = configured(c);
    (void)m.record(concat(iota(n), {7}), n);  // the prompt, then a token decode wrote
    return m.query(iota(n)).decision;
  };
  const pfx::Decision short_prompt = held_whole({true, 0, 32, 256}, 97);
  ok = ok && short_prompt.offset == 64 && short_prompt.reason == Reason::reused;
  ok = ok && short_prompt.bound == Bound::prefill_step;
  const pfx::Decision ends_alone = held_whole({true, 0, 32, 256}, 257);
  ok = ok && ends_alone.offset == 256 && ends_alone.bound == Bound::one_token_left;
  const pfx::Decision no_step = held_whole({true, 0, 32, 0}, 97);
  ok = ok && no_step.offset == 96 && no_step.bound == Bound::one_token_left;
  // keep_min 65: 64 rows are too few, though the 96 the grid allows would not be.
  const pfx::Decision below = held_whole({true, 65, 32, 256}, 97);
  ok = ok && below.offset == 0 && below.reason == Reason::below_keep_min && below.bound == Bound::prefill_step;
  // One step whatever the length: only a one-token prompt ends alone, so a resume never leaves one
  // token (lowered one chunk from len - 1), and a two-token prompt is served cold.
  const pfx::Decision one_step = held_whole({true, 0, 4, SIZE_MAX}, 9);
  ok = ok && one_step.offset == 4 && one_step.bound == Bound::prefill_step;
  const pfx::Decision two = held_whole({true, 0, 1, SIZE_MAX}, 2);
  ok = ok && two.offset == 0 && two.reason == Reason::nothing_reusable && two.bound == Bound::prefill_step;
  // Changing the prefill step keeps the record: it changes no grid (INV-11).
  Machine m = configured({true, 0, 32, 256});
  ok = ok && m.record(iota(97), 97).accepted();
  ok = ok && m.configure({true, 0, 32, 0}).accepted() && m.held().ids == iota(97);
  ok = ok && m.configure({true, 0, 32, SIZE_MAX}).accepted() && m.held().ids == iota(97);
  return ok;
}
static_assert(prefill_step_is_named_and_keep_min_judged_after_it());

/// The admission padding (INV-12) on the same examples, with vLLM's padding of a speculating
/// engine (3 draft tokens): the 97-token prompt is resumed at 96, since that admission computes 4
/// rows, not its last token alone; the 257-token one, whose cold run ends with one token alone, is
/// not resumed at 256 (4 rows there) but at the multiple of lcm(32, 256) below: 0, served cold.
/// Changing the padding keeps the record, as changing the step does.
constexpr bool admission_padding_keeps_or_lowers_the_last_token() {
  bool ok = true;
  const auto held_whole = [](const Config& c, std::size_t n) {
    Machine m = configured(c);
    (void)m.record(concat(iota(n), {7}), n);  // the prompt, then a token decode wrote
    return m.query(iota(n)).decision;
  };
  const pfx::Decision kept = held_whole({true, 0, 32, 256, 3}, 97);
  ok = ok && kept.offset == 96 && kept.reason == Reason::reused && kept.bound == Bound::one_token_left;
  const pfx::Decision lowered = held_whole({true, 0, 32, 256, 3}, 257);
  ok = ok && lowered.offset == 0 && lowered.reason == Reason::nothing_reusable;
  ok = ok && lowered.bound == Bound::prefill_step;
  // With steps of 64 the 257-token prompt falls one multiple of 64, to 192.
  ok = ok && held_whole({true, 0, 32, 64, 1}, 257).offset == 192;
  // Without a step the padding is no premise: 96, as ever.
  ok = ok && held_whole({true, 0, 32, 0, SIZE_MAX}, 97).offset == 96;
  Machine m = configured({true, 0, 32, 256, 3});
  ok = ok && m.record(iota(97), 97).accepted();
  ok = ok && m.configure({true, 0, 32, 256, 0}).accepted() && m.held().ids == iota(97);
  ok = ok && m.configure({true, 0, 32, 256, SIZE_MAX}).accepted() && m.held().ids == iota(97);
  return ok;
}
static_assert(admission_padding_keeps_or_lowers_the_last_token());

/// prefill_step_bound at full width, where no prompt a test can hold reaches: the lcm past 2^64 - 1,
/// one step whatever the length (SIZE_MAX) on a prompt of 2^64 - 1 tokens, a step that divides the
/// chunk.
constexpr bool prefill_step_bound_at_full_width() {
  constexpr std::size_t two_to_32 = std::size_t{1} << 32;
  constexpr std::size_t two_to_63 = std::size_t{1} << 63;
  bool ok = true;
  // A cold run of 2^63 + 1 tokens ends alone in steps of 2^32; lcm(2^32 + 1, 2^32) is past 2^64 - 1
  // (a product that wrapped would be 2^32), so only 0 keeps the premise.
  const std::size_t chunk = two_to_32 + 1;
  ok = ok && pfx::prefill_step_bound(two_to_63 + 1, two_to_63 - two_to_63 % chunk, chunk, two_to_32) == 0;
  // In steps of 2^32 that divide the chunk 2^33: every multiple of the chunk keeps it.
  ok = ok && pfx::prefill_step_bound(two_to_63 + 1, two_to_63, 2 * two_to_32, two_to_32) == two_to_63;
  // One step of 2^64 - 1 tokens: a resume at 2^64 - 2 would leave one token alone; one chunk down.
  ok = ok && pfx::prefill_step_bound(SIZE_MAX, SIZE_MAX - 1, 1, SIZE_MAX) == SIZE_MAX - 2;
  // The cold run does not end alone, and 16 divides the chunk 32: never lowered.
  ok = ok && pfx::prefill_step_bound(1001, 992, 32, 16) == 992;
  // No premise, or nothing to keep.
  ok = ok && pfx::prefill_step_bound(97, 96, 32, 0) == 96 && pfx::prefill_step_bound(1, 0, 1, 2) == 0;
  // A padded admission at n - 1: one step of 2^64 - 1 tokens kept at 2^64 - 2 (not one token
  // alone there); a cold run of 2^63 + 1 tokens ending alone in steps of 2^32 falls from 2^63 to
  // the multiple of lcm(2^32, 2^32) below; no step, no premise.
  ok = ok && pfx::prefill_step_bound(SIZE_MAX, SIZE_MAX - 1, 1, SIZE_MAX, true) == SIZE_MAX - 1;
  ok = ok && pfx::prefill_step_bound(two_to_63 + 1, two_to_63, two_to_32, two_to_32, true) == two_to_63 - two_to_32;
  ok = ok && pfx::prefill_step_bound(97, 96, 32, 0, true) == 96;
  return ok;
}
static_assert(prefill_step_bound_at_full_width());

TEST(Machine, ThePrefillStepBoundAtFullWidth) {
  pfx::test::verifies("INV-12");
  EXPECT_TRUE(prefill_step_bound_at_full_width());
}

TEST(Machine, AnAdmissionPaddingKeepsOrLowersTheResumeAtTheLastToken) {
  pfx::test::verifies("INV-12");
  EXPECT_TRUE(admission_padding_keeps_or_lowers_the_last_token());
}

TEST(Machine, ThePrefillStepIsNamedAndKeepMinJudgesTheOffsetItLeaves) {
  pfx::test::verifies("INV-4 INV-12");
  EXPECT_TRUE(prefill_step_is_named_and_keep_min_judged_after_it());
  EXPECT_EQ(pfx::name(Bound::prefill_step), "prefill step");
}

/// Decode rows exact (INV-2): a record of 12 ids, the last 4 written by decode (canonical_end 8), on
/// grid 4. Without the premise a prompt that keeps all 12 is resumed at 8; with it at 12, every row
/// held, and the record still says which rows decode wrote. Changing the premise, either way,
/// forgets the record: turned on, its decode rows were not known exact; turned off, rows below a
/// later canonical_end may be rows decode wrote.
constexpr bool decode_rows_exact_grants_rows_decode_wrote() {
  bool ok = true;
  const Config inexact{true, 2, 4};
  const Config exact{true, 2, 4, 0, 0, true};
  const Tokens prompt = iota(15);
  Machine m = configured(exact);
  ok = ok && m.record(iota(12), 8).accepted();
  const pfx::Decision lifted = m.query(prompt).decision;
  ok = ok && lifted.offset == 12 && lifted.reason == Reason::reused && lifted.bound == Bound::common_prefix;
  ok = ok && m.held().canonical_end == 8;
  // A commit from that offset: the record is its ids, canonical_end its prompt's length, as ever.
  ok = ok && m.begin(prompt, 12).accepted() && m.commit(concat(prompt, {99}), 15).accepted();
  ok = ok && m.held().ids.size() == 16 && m.held().canonical_end == 15;
  ok = ok && m.query(concat(concat(prompt, {99}), {1})).decision.offset == 16;
  // Turned off: forgotten, though the chunk is the same.
  ok = ok && m.configure(inexact).accepted() && m.held().ids.empty();
  Machine n = configured(inexact);
  ok = ok && n.record(iota(12), 8).accepted();
  const pfx::Decision kept = n.query(prompt).decision;
  ok = ok && kept.offset == 8 && kept.bound == Bound::canonical_end;
  // Turned on: forgotten too; keep_min, prefill step and padding changes keep it, as ever.
  ok = ok && n.configure({true, 3, 4, 2, 1}).accepted() && n.held().ids == iota(12);
  ok = ok && n.configure(exact).accepted() && n.held().ids.empty();
  ok = ok && n.record(iota(12), 8).accepted() && n.configure({true, 0, 4, 3, 0, true}).accepted();
  ok = ok && n.held().ids == iota(12);
  return ok;
}
static_assert(decode_rows_exact_grants_rows_decode_wrote());

TEST(Machine, DecodeRowsExactGrantsRowsDecodeWroteAndAChangeOfItForgetsTheRecord) {
  pfx::test::verifies("INV-2 INV-11");
  EXPECT_TRUE(decode_rows_exact_grants_rows_decode_wrote());
}

/// Disabled: every answer 0 with reason disabled, and record and commit store nothing (the seed).
constexpr bool disabled_answers_zero_and_stores_nothing() {
  bool ok = true;
  Machine m = configured({false, 0, 1});
  ok = ok && m.record(iota(50), 50).accepted() && m.held().ids.empty();
  ok = ok && m.begin(iota(50), 0).accepted();
  ok = ok && m.commit(iota(60), 50).accepted() && m.held().ids.empty();
  ok = ok && m.query(iota(70)).decision == pfx::Decision{0, 0, Reason::disabled, Bound::none};
  return ok;
}
static_assert(disabled_answers_zero_and_stores_nothing());

TEST(Machine, DisabledAnswersZeroAndStoresNothing) {
  pfx::test::verifies("INV-6");
  EXPECT_TRUE(disabled_answers_zero_and_stores_nothing());
}

/// step() is the pure transition function: the state passed in is not touched.
constexpr bool step_is_pure() {
  Machine before = configured({true, 1, 1});
  (void)before.record(iota(5), 5);
  const Machine copy = before;
  const Tokens prompt = concat(iota(3), {9});
  const auto [after, out] = pfx::step(before, pfx::events::Begin{prompt, 3});
  return before == copy && out.accepted() && after.held().ids == iota(3) &&
         after.phase() == pfx::Phase::writing;
}
static_assert(step_is_pure());

TEST(Machine, StepIsAPureTransitionFunction) {
  pfx::test::verifies("INV-8");
  EXPECT_TRUE(step_is_pure());
}

/// The compare is exact in constant evaluation on sequences longer than the run-time block, where
/// the run-time path would use memcmp (which a constant expression cannot call).
constexpr bool common_prefix_is_constant_on_long_sequences() {
  const Tokens a = iota(2500);
  Tokens b = a;
  b[2100] = -1;
  return pfx::common_prefix(a, b) == 2100 && pfx::common_prefix(a, a) == 2500;
}
static_assert(common_prefix_is_constant_on_long_sequences());

TEST(Machine, TheCompareIsUsableInConstantExpressionsOnLongSequences) {
  pfx::test::verifies("INV-1");
  EXPECT_TRUE(common_prefix_is_constant_on_long_sequences());
}

TEST(Machine, CommitWithinTheReservedCapacityNeverReallocates) {
  pfx::test::verifies("MEM-1");
  Machine m = configured({true, 64, 1});
  constexpr std::size_t capacity = 4096;
  m.reserve(capacity);
  const pfx::token* storage = m.held().ids.data();
  Tokens context = iota(1000);
  ASSERT_TRUE(m.record(context, context.size()).accepted());
  std::size_t canonical_end = context.size();
  for (int turn = 0; turn < 5; ++turn) {
    const Tokens prompt = concat(context, iota(100, 5000 + turn));
    const std::size_t offset = m.query(prompt).decision.offset;
    ASSERT_EQ(offset, canonical_end);
    ASSERT_TRUE(m.begin(prompt, offset).accepted());
    context = concat(prompt, {1, 2, 3});
    ASSERT_TRUE(m.commit(context, prompt.size()).accepted());
    canonical_end = prompt.size();
    EXPECT_EQ(m.held().ids.data(), storage);  // the kept prefix was not moved or copied
    EXPECT_EQ(m.capacity(), capacity);
  }
  EXPECT_EQ(m.begun().size(), 0U);
  // The record and the begun prompt, each reserved once.
  EXPECT_EQ(m.memory_bytes(), sizeof(Machine) + 2 * capacity * sizeof(pfx::token));
}

TEST(Machine, WithoutReserveTheRecordUsesFourBytesPerHeldTokenPlusAConstant) {
  pfx::test::verifies("MEM-1");
  Machine m = configured({true, 1, 1});
  Tokens context;
  for (std::size_t turn = 1; turn <= 8; ++turn) {
    const Tokens prompt = concat(context, iota(100 * turn, 1000));
    ASSERT_TRUE(m.begin(prompt, m.query(prompt).decision.offset).accepted());
    context = concat(prompt, {1});
    ASSERT_TRUE(m.commit(context, prompt.size()).accepted());
    EXPECT_EQ(m.capacity(), context.size());  // no geometric slack
    // The record, and the longest prompt begun (this one: the prompts grow).
    EXPECT_EQ(m.memory_bytes(), sizeof(Machine) + 4 * (context.size() + prompt.size()));
  }
}

}  // namespace
