// Engines that own their cache (docs/driver.md, "Engines that own their cache"), on the reference
// model behind a cache of its own that, like llama.cpp's, refuses a write that does not continue the
// rows it holds: a lane over it gives every response of a multi-turn trace bit for bit as a cold run
// of the plain reference engine, rows compared as bytes in the engine's own layout; the conformance
// check finds the same grid; and driver::verify, the end-to-end check a user runs on their engine,
// passes on the engine's grid, fails off it, and fails when it compared nothing.

#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/conform/check.hpp>
#include <pfx/driver/cold_run.hpp>
#include <pfx/driver/host_kv_state.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/driver/sharded_kv_state.hpp>
#include <pfx/driver/verify.hpp>
#include <pfx/engines/cache_owning_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <bit>
#include <cstdint>
#include <memory>
#include <stdexcept>

namespace {

using pfx::token;
using pfx::engines::CacheOwningEngine;
using pfx::engines::HostReferenceEngine;
using pfx::driver::Lane;
using pfx::engines::ReferenceModelShape;
using pfx::driver::TraceRequest;

constexpr std::size_t capacity = 256;

/// The rows [0, n) of a cache-owning engine's view, in the engine's layout, from the plain reference
/// engine's fp32 rows: each row, every layer's key then value.
std::vector<std::byte> in_engine_layout(const pfx::driver::KvState& host, std::size_t n, const ReferenceModelShape& shape) {
  const std::vector<float> floats = host.copy_rows(0, n);
  std::vector<std::byte> out;
  for (std::size_t row = 0; row < n; ++row) {
    for (std::size_t plane = 0; plane < shape.layers * 2; ++plane) {
      const float* begin = floats.data() + (plane * n + row) * shape.width;
      const auto* bytes = reinterpret_cast<const std::byte*>(begin);
      out.insert(out.end(), bytes, bytes + shape.width * sizeof(float));
    }
  }
  return out;
}

PFX_PROPERTY(OwnedCache, EveryResponseEqualsAColdRunOfThePlainEngine, "DRV-8 THM-1", ()) {
  const ReferenceModelShape shape = *pfx::test::model_shapes();
  const std::size_t keep_min = *rc::gen::element<std::size_t>(0, 1, 5, 16);
  const auto steps = *rc::gen::container<std::vector<pfx::test::TraceStep>>(pfx::test::trace_steps(shape.vocab));
  CacheOwningEngine engine(shape, capacity);
  HostReferenceEngine plain(shape);
  Lane lane(engine, {.capacity = capacity, .config = {.enabled = true, .keep_min = keep_min}, .poison = true});
  RC_ASSERT(!lane.kv().owns_rows());
  RC_ASSERT(lane.kv().memory_bytes() == 0U);
  pfx::test::TraceBuilder trace(shape.vocab, capacity, shape.seed);
  std::size_t reused = 0;
  for (const pfx::test::TraceStep& step : steps) {
    if (step.kind == pfx::test::TraceStep::Kind::clear) {
      lane.clear();
      continue;
    }
    const std::vector<token> prompt = trace.prompt(step);
    const pfx::driver::Response response = lane.serve(prompt, step.max_new_tokens);
    const std::size_t rows = pfx::driver::rows_written(prompt.size(), step.max_new_tokens);
    RC_ASSERT(engine.held() == rows);  // the lane's record and the engine's cache agree
    const auto cold_kv = plain.make_kv_state(capacity);
    const pfx::driver::ColdRun cold = pfx::driver::run_cold(plain, *cold_kv, prompt, step.max_new_tokens);
    RC_ASSERT(pfx::test::same_bits(response.logits, cold.logits));
    RC_ASSERT(response.generated == cold.generated);
    RC_ASSERT(lane.kv().read_rows(0, rows) == in_engine_layout(*cold_kv, rows, shape));
    reused += response.decision.offset;
    trace.answered(prompt, response.generated);
  }
  RC_CLASSIFY(reused > 0, "some rows reused");
}

// A resume must give up the rows past its offset through forget: the engine's cache refuses a write
// that does not continue what it holds, as llama.cpp's does.
TEST(OwnedCache, AWriteThatDoesNotContinueTheCacheIsRefused) {
  pfx::test::verifies("DRV-8");
  const ReferenceModelShape shape{.vocab = 16, .width = 4, .hidden = 8, .layers = 2, .chunk = 4, .seed = 3};
  CacheOwningEngine engine(shape, 64);
  const auto kv = engine.make_kv_state(64);
  std::vector<float> logits(shape.vocab);
  const std::vector<token> tokens = {1, 2, 3, 4, 5, 6, 7, 8};
  kv->forget(0);
  engine.prefill(*kv, tokens, 0, logits);
  EXPECT_THROW(engine.prefill(*kv, std::span(tokens).first(4), 4, logits), std::logic_error);
  kv->forget(4);
  EXPECT_NO_THROW(engine.prefill(*kv, std::span(tokens).first(4), 4, logits));
  // A view of a cache pfx does not own: no fp32 copy, no fill, rows only in the engine's format.
  EXPECT_THROW((void)kv->copy_rows(0, 4), std::logic_error);
  EXPECT_THROW(kv->fill(0, 4, 0.0f), std::logic_error);
  EXPECT_THROW((void)kv->read_rows(0, 9), std::out_of_range);
  EXPECT_THROW(kv->forget(65), std::out_of_range);
  EXPECT_EQ(kv->read_rows(0, 8).size(), 8 * shape.layers * 2 * shape.width * sizeof(float));
}

// The conformance check drives a cache it does not own through forget, and reads rows as bytes: it
// finds the reference engine's grid, and makes two KV states in all, not one per cold run.
TEST(OwnedCache, TheConformanceCheckFindsTheEnginesGrid) {
  pfx::test::verifies("DRV-8 CONF-1");
  for (const std::size_t chunk : {1U, 3U, 4U}) {
    const ReferenceModelShape shape{.vocab = 32, .width = 8, .hidden = 16, .layers = 2, .chunk = chunk, .seed = 11};
    CacheOwningEngine engine(shape, 1024);
    pfx::conform::Budget budget = pfx::conform::Budget::named("quick");
    const pfx::conform::Report report =
        pfx::conform::check(engine, {.budget = budget, .rule_chunk = std::nullopt, .engine_name = "owned", .progress = {}});
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    EXPECT_EQ(report.premise_failure, std::nullopt);
    EXPECT_EQ(report.verdict, pfx::conform::Verdict::safe);
    EXPECT_EQ(report.recommended, chunk);
    for (const pfx::conform::GridResult& g : report.grids) {
      EXPECT_GT(g.resumes, 0U);
      EXPECT_EQ(g.exact(), g.grid % chunk == 0) << "grid " << g.grid;
      if (g.mismatch && g.mismatch->difference.where != pfx::conform::Difference::Where::logits) {
        EXPECT_EQ(g.mismatch->difference.where, pfx::conform::Difference::Where::row_bytes);
      }
    }
  }
}

/// Counts the KV states an engine makes.
class CountingEngine final : public pfx::engines::WrappedEngine {
 public:
  using WrappedEngine::WrappedEngine;
  std::unique_ptr<pfx::driver::KvState> make_kv_state(std::size_t rows) const override {
    ++made;
    return WrappedEngine::make_kv_state(rows);
  }
  void prefill(pfx::driver::KvState& kv, std::span<const token> tokens, std::size_t position,
               std::span<float> logits) override {
    inner_.prefill(kv, tokens, position, logits);
  }
  void decode(pfx::driver::KvState& kv, token next, std::size_t position, std::span<float> logits) override {
    inner_.decode(kv, next, position, logits);
  }
  mutable std::size_t made = 0;
};

TEST(OwnedCache, TheCheckReusesOneStateForItsColdRuns) {
  pfx::test::verifies("DRV-1 CONF-1");
  HostReferenceEngine engine({.vocab = 32, .width = 8, .hidden = 16, .layers = 2, .chunk = 4, .seed = 11});
  CountingEngine counting(engine);
  const pfx::conform::Report report = pfx::conform::check(
      counting, {.budget = pfx::conform::Budget::named("quick"), .rule_chunk = std::nullopt, .engine_name = "c", .progress = {}});
  EXPECT_GT(report.cold_runs, 2U);
  EXPECT_EQ(counting.made, 2U) << "one state for the cold runs, one for the resumes";
}

std::vector<TraceRequest> conversation(std::size_t vocab, std::size_t turns) {
  std::vector<TraceRequest> trace;
  std::vector<token> history;
  for (std::size_t t = 0; t < turns; ++t) {
    for (std::size_t i = 0; i < 9 + 5 * t; ++i) history.push_back(static_cast<token>((7 * t + 3 * i * i + 1) % vocab));
    trace.push_back({.prompt = history, .max_new_tokens = 3 + t % 2});
  }
  return trace;
}

// Mutant verify-decode-rows: a resumed response vouches for its decode rows too, and verify compares
// them with its cold run's, though its tokens and logits agree (replay's verify has the same test).
TEST(Verify, ComparesTheDecodeRowsOfAResumedResponse) {
  pfx::test::verifies("DRV-9 THM-1");
  HostReferenceEngine inner(ReferenceModelShape{.vocab = 32, .width = 8, .hidden = 16, .layers = 2, .chunk = 4, .seed = 5});
  const std::vector<pfx::token> first = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<pfx::token> second = first;
  second.insert(second.end(), {9, 10, 11, 12});
  // The second request resumes at 8 and decodes rows 12 and 13; its row 13 is changed on the lane's side.
  pfx::test::DecodeRowTamperer engine(inner, 13);
  const std::vector<TraceRequest> trace = {{.prompt = first, .max_new_tokens = 2}, {.prompt = second, .max_new_tokens = 3}};
  const pfx::driver::VerifyReport r = pfx::driver::verify(engine, trace, {.capacity = 64, .config = {.keep_min = 4}});
  EXPECT_EQ(r.reused_tokens, 8U);
  EXPECT_EQ(r.compared, 2U);
  EXPECT_EQ(r.mismatches, 1U);
  ASSERT_TRUE(r.first_mismatch.has_value());
  EXPECT_EQ(r.first_mismatch->request, 2U);  // numbered from 1, as the program numbers them
  EXPECT_EQ(r.first_mismatch->what, "KV row 13 differs from the cold run's");
}

TEST(Verify, PassesOnTheEnginesGridFailsOffItAndFailsWhenNothingIsCompared) {
  pfx::test::verifies("DRV-9 DRV-8 CEX-1");
  const ReferenceModelShape shape{.vocab = 32, .width = 8, .hidden = 16, .layers = 2, .chunk = 4, .seed = 5};
  const std::vector<TraceRequest> trace = conversation(shape.vocab, 6);
  for (const bool owned : {false, true}) {
    SCOPED_TRACE(owned ? "an engine that owns its cache" : "pfx's KV state");
    HostReferenceEngine plain(shape);
    CacheOwningEngine cached(shape, 512);
    pfx::driver::Engine& engine = owned ? static_cast<pfx::driver::Engine&>(cached) : plain;
    const pfx::driver::VerifyReport good = pfx::driver::verify(engine, trace, {.capacity = 512, .config = {.keep_min = 4}});
    EXPECT_TRUE(good.ok());
    EXPECT_EQ(good.compared, trace.size());
    EXPECT_EQ(good.mismatches, 0U);
    EXPECT_GT(good.reused_tokens, 0U);
    EXPECT_GT(good.rows_compared, 0U);
    EXPECT_EQ(good.first_mismatch, std::nullopt);

    // The rule of the original class (chunk 1) resumes off the engine's grid: THM-1's counterexample.
    const pfx::driver::VerifyReport off = pfx::driver::verify(engine, trace, {.capacity = 512, .config = {.keep_min = 1}, .rule_chunk = 1});
    EXPECT_FALSE(off.ok());
    EXPECT_GT(off.mismatches, 0U);
    ASSERT_TRUE(off.first_mismatch.has_value());
    EXPECT_GT(off.first_mismatch->request, 0U);  // the first request is cold on both sides

    // Nothing compared is not a pass: an empty trace, or one the lane refuses whole.
    EXPECT_FALSE(pfx::driver::verify(engine, {}, {.capacity = 512}).ok());
    const std::vector<TraceRequest> refused = {{.prompt = {}, .max_new_tokens = 1}};
    const pfx::driver::VerifyReport none = pfx::driver::verify(engine, refused, {.capacity = 512});
    EXPECT_EQ(none.compared, 0U);
    EXPECT_FALSE(none.ok());
  }
}

// difference() is "" exactly when both sides are the same bits, and else names the first generated
// token, then logit, then KV row digest that differs; -0 is not +0, and a NaN equals only its bits.
PFX_PROPERTY(Verify, DifferenceIsEmptyExactlyWhenBothSidesAreTheSameBits, "DRV-9", ()) {
  using pfx::driver::Vouched;
  const auto floats = rc::gen::map(rc::gen::arbitrary<std::uint32_t>(), [](std::uint32_t bits) {
    return std::bit_cast<float>(bits);
  });
  Vouched cold{*rc::gen::container<std::vector<token>>(rc::gen::inRange<token>(0, 4)),
               *rc::gen::container<std::vector<float>>(floats),
               *rc::gen::container<std::vector<std::uint64_t>>(rc::gen::inRange<std::uint64_t>(0, 3)),
               {}};
  for (std::size_t row = 0; row < cold.rows.size(); ++row) cold.positions.push_back(row);
  Vouched resumed = cold;
  const int changed = *rc::gen::inRange(0, 4);  // 0: nothing; else the tokens, the logits, the rows
  std::size_t at = 0;
  // Sets one drawn element to `other`, or adds it to an empty side: then the sizes differ.
  const auto change = [&](auto& values, auto other) -> std::string {
    if (values.empty()) {
      values.push_back(other);
      return "a different number of ";
    }
    at = *rc::gen::inRange<std::size_t>(0, values.size());
    values[at] = other;
    return "";
  };
  std::string expected;
  if (changed == 1) {
    const std::string grown = change(resumed.generated, token{4});
    expected = grown.empty() ? "generated token " + std::to_string(at) + ": 4 vs " : grown + "generated tokens";
  } else if (changed == 2) {
    const std::string grown = change(resumed.logits, 0.0f);
    if (grown.empty()) resumed.logits[at] = std::bit_cast<float>(std::bit_cast<std::uint32_t>(cold.logits[at]) ^ 1U);
    expected = grown.empty() ? "logit " + std::to_string(at) + ": " : grown + "logits";
  } else if (changed == 3 && !cold.rows.empty()) {  // rows are compared where both sides have them
    change(resumed.rows, std::uint64_t{3});
    expected = "KV row " + std::to_string(at) + " differs from the cold run's";
  }
  const std::string what = pfx::driver::difference(resumed, cold);
  RC_ASSERT(what.starts_with(expected));
  RC_ASSERT(what.empty() == expected.empty());
  RC_ASSERT(pfx::driver::difference(cold, cold).empty());
  RC_CLASSIFY(expected.empty(), "the same bits");
}

/// A state read the way a cache an engine owns is read: read_rows alone, row by row.
class ReadOnlyView : public pfx::driver::KvState {
 public:
  explicit ReadOnlyView(const pfx::driver::KvState& rows) : rows_(rows) {}
  [[nodiscard]] const pfx::driver::KvShape& shape() const noexcept override { return rows_.shape(); }
  void forget(std::size_t) override {}
  void synchronize() override {}
  [[nodiscard]] bool readable() const noexcept override { return true; }
  [[nodiscard]] std::vector<std::byte> read_rows(std::size_t from, std::size_t to) const override {
    return rows_.read_rows(from, to);
  }

 protected:
  [[nodiscard]] const pfx::driver::KvState& rows() const noexcept { return rows_; }

 private:
  const pfx::driver::KvState& rows_;
};

// A state that owns its rows is read once for each row's bytes (for_each_row), and each is that
// row's own read: what a row-by-row read gives, with a value in every float that names its row, plane
// and column. The digests of a bit-exactness check follow, and a changed row is named as itself.
PFX_PROPERTY(Verify, EachRowOfOneReadIsThatRowsOwnRead, "DRV-9", ()) {
  const pfx::driver::KvShape shape{.capacity = *rc::gen::inRange<std::size_t>(1, 40),
                                   .layers = *rc::gen::inRange<std::size_t>(1, 4),
                                   .width = *rc::gen::inRange<std::size_t>(1, 9)};
  // Every float names its row, plane and column.
  const auto distinct = [&shape](pfx::driver::HostKvState& kv) {
    for (std::size_t layer = 0; layer < shape.layers; ++layer) {
      for (const pfx::driver::Plane plane : {pfx::driver::Plane::key, pfx::driver::Plane::value}) {
        for (std::size_t p = 0; p < shape.capacity; ++p) {
          for (std::size_t x = 0; x < shape.width; ++x) {
            const std::size_t at = ((p * shape.layers + layer) * 2 + static_cast<std::size_t>(plane)) * shape.width + x;
            kv.row(layer, plane, p)[x] = static_cast<float>(at);
          }
        }
      }
    }
  };
  pfx::driver::HostKvState resumed(shape);
  distinct(resumed);
  const std::size_t to = *rc::gen::inRange<std::size_t>(0, shape.capacity + 1);
  const std::size_t from = *rc::gen::inRange<std::size_t>(0, to + 1);
  const std::vector<std::vector<std::byte>> each = pfx::test::rows_apart(resumed, from, to);
  RC_ASSERT(each.size() == to - from);
  for (std::size_t i = 0; i < each.size(); ++i) RC_ASSERT(each[i] == resumed.read_rows(from + i, from + i + 1));
  RC_ASSERT(pfx::test::rows_apart(ReadOnlyView(resumed), from, to) == each);  // the row-by-row default
  RC_ASSERT_THROWS_AS((void)pfx::test::rows_apart(resumed, from, shape.capacity + 1), std::out_of_range);

  // A sharded state gathers its rows from their owners into the same layout, and is split the same way.
  const pfx::driver::ShardLayout layout{.ranks = *rc::gen::inRange<std::size_t>(1, 4),
                                        .interleave = *rc::gen::inRange<std::size_t>(1, 5)};
  std::vector<std::unique_ptr<pfx::driver::KvState>> shards;
  for (std::size_t r = 0; r < layout.ranks; ++r) {
    shards.push_back(std::make_unique<pfx::driver::HostKvState>(
        pfx::driver::KvShape{layout.shard_capacity(shape.capacity), shape.layers, shape.width}));
  }
  pfx::driver::ShardedKvState sharded(shape, layout, std::move(shards));
  for (std::size_t p = 0; p < shape.capacity; ++p) sharded.fill(p, p + 1, static_cast<float>(p) + 0.5f);
  const std::vector<std::vector<std::byte>> each_sharded = pfx::test::rows_apart(sharded, from, to);
  RC_ASSERT(each_sharded.size() == to - from);
  for (std::size_t i = 0; i < each_sharded.size(); ++i) {
    RC_ASSERT(each_sharded[i] == sharded.read_rows(from + i, from + i + 1));
  }

  if (to == 0) return;
  pfx::driver::HostKvState cold(shape);
  distinct(cold);
  const std::size_t changed = *rc::gen::inRange<std::size_t>(0, to);
  resumed.fill(changed, changed + 1, -1.0f);
  const auto vouched = [to](const pfx::driver::KvState& kv) { return pfx::driver::Vouched::of({}, {}, kv, to); };
  RC_ASSERT(pfx::driver::difference(vouched(resumed), vouched(cold)) ==
            "KV row " + std::to_string(changed) + " differs from the cold run's");
}

/// A view whose one read of its rows goes wrong in one way at row `at`.
class MisreadView final : public ReadOnlyView {
 public:
  enum class Misread { none, empty_row, skipped_row, repeated_row, short_read, extra_row };
  MisreadView(const pfx::driver::KvState& rows, Misread misread, std::size_t at)
      : ReadOnlyView(rows), misread_(misread), at_(at) {}

 protected:
  void visit_rows(std::size_t from, std::size_t to, const RowVisitor& visit) const override {
    for (std::size_t row = from; row < to; ++row) {
      const std::vector<std::byte> bytes = rows().read_rows(row, row + 1);
      if (row == at_ && misread_ == Misread::empty_row) {
        visit(row, {});
        continue;
      }
      if (row == at_ && misread_ == Misread::skipped_row) continue;
      if (row == at_ && misread_ == Misread::short_read) return;
      if (row == at_ && misread_ == Misread::repeated_row) visit(row, bytes);
      visit(row, bytes);
    }
    if (misread_ == Misread::extra_row) visit(to, rows().read_rows(at_, at_ + 1));
  }

 private:
  Misread misread_;
  std::size_t at_;
};

// A read of rows that yields a row of no bytes, skips, repeats or adds a row, or stops short, is
// refused, naming the row: a check fed by it would pass having compared nothing, or fewer rows than it
// counts. A read without a fault gives the rows themselves.
PFX_PROPERTY(Verify, AMisreadOfRowsIsRefusedNotCompared, "DRV-9", ()) {
  using Misread = MisreadView::Misread;
  const pfx::driver::KvShape shape{.capacity = *rc::gen::inRange<std::size_t>(1, 40),
                                   .layers = *rc::gen::inRange<std::size_t>(1, 3),
                                   .width = *rc::gen::inRange<std::size_t>(1, 5)};
  pfx::driver::HostKvState rows(shape);
  for (std::size_t p = 0; p < shape.capacity; ++p) rows.fill(p, p + 1, static_cast<float>(p) + 0.5f);
  const std::size_t to = *rc::gen::inRange<std::size_t>(1, shape.capacity + 1);
  const std::size_t from = *rc::gen::inRange<std::size_t>(0, to);
  const std::size_t at = *rc::gen::inRange(from, to);
  const Misread misread = *rc::gen::element(Misread::none, Misread::empty_row, Misread::skipped_row,
                                            Misread::repeated_row, Misread::short_read, Misread::extra_row);
  const MisreadView view(rows, misread, at);
  const auto n = [](std::size_t x) { return std::to_string(x); };
  const std::string expected =
      misread == Misread::empty_row      ? "yielded row " + n(at) + " with no bytes"
      : misread == Misread::repeated_row ? "yielded row " + n(at) + " where row " + n(at + 1) + " was next"
      : misread == Misread::extra_row    ? "yielded row " + n(to) + ", past its end"
      : misread == Misread::short_read || (misread == Misread::skipped_row && at + 1 == to)
          ? "yielded " + n(at - from) + " of its " + n(to - from) + " rows"
          : "yielded row " + n(at + 1) + " where row " + n(at) + " was next";
  RC_TAG(static_cast<int>(misread));  // 0: none, then the misreads in their order
  if (misread == Misread::none) {
    RC_ASSERT(pfx::test::rows_apart(view, from, to) == pfx::test::rows_apart(rows, from, to));
    return;
  }
  try {
    (void)pfx::test::rows_apart(view, from, to);
    RC_FAIL("a misread of rows [" + n(from) + ", " + n(to) + ") was taken for a read");
  } catch (const std::logic_error& e) {
    RC_ASSERT(std::string_view(e.what()).starts_with("KvState::for_each_row: the read of rows [" + n(from) + ", " +
                                                     n(to) + ") " + expected));
  }
  // The digests of a check read the same way: the misread ends the check, it is not compared.
  RC_ASSERT_THROWS_AS((void)pfx::driver::Vouched::of({}, {}, view, to), std::logic_error);
}

// A response the lane fails is a mismatch, never a pass.
TEST(Verify, AFailedRequestIsAMismatch) {
  pfx::test::verifies("DRV-9");
  const ReferenceModelShape shape{.vocab = 32, .width = 8, .hidden = 16, .layers = 2, .chunk = 4, .seed = 5};
  HostReferenceEngine engine(shape);
  pfx::test::PeekingEngine peeking(engine);
  peeking.peek = true;  // reads a row past its chunk: NaN under poisoning
  const pfx::driver::VerifyReport r = pfx::driver::verify(peeking, conversation(shape.vocab, 3), {.capacity = 128});
  EXPECT_FALSE(r.ok());
  EXPECT_GT(r.mismatches, 0U);
  ASSERT_TRUE(r.first_mismatch.has_value());
  EXPECT_NE(r.first_mismatch->what.find("failed"), std::string::npos) << r.first_mismatch->what;
}

}  // namespace
