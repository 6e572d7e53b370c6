// The cost of the machine's two hot paths, query and commit, next to memcmp over the same bytes
// (docs/performance.md). Every size is run for memcmp, query, commit and begin+commit in turn, so that
// the figures of one size stand side by side in one run.
//
//   BM_Memcmp/N       memcmp of the N held ids against the first N tokens of the prompt: the floor
//   BM_Query/N        query(prompt) on a record of N tokens, prompt = the N held ids + 1 token, so the
//                     whole record is compared and the offset granted is N
//   BM_Commit/N       commit of a request begun at offset N that extends the record by 1024 tokens;
//                     only the commit is timed (begin runs between the timed spans)
//   BM_BeginCommit/N  the same request with begin and commit both timed
//   BM_ClockSpan      the two clock reads around BM_Commit's timed span, with nothing between them
//
// bytes_per_second counts the N * 4 bytes of the compared prefix in every benchmark, so the GB/s of
// one size compare directly. The counter mem_per_token is machine.memory_bytes() per held token.

#include <pfx/core.hpp>

#include <benchmark/benchmark.h>

#include "run_benchmarks.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace {

using Tokens = std::vector<pfx::token>;

/// The record sizes measured: 1K, 32K and 1M tokens (4 KB, 128 KB and 4 MB of ids).
constexpr std::array<std::size_t, 3> sizes{std::size_t{1} << 10, std::size_t{1} << 15,
                                           std::size_t{1} << 20};

/// Tokens a committed request adds to the record: 512 new prompt tokens and 512 generated.
constexpr std::size_t new_prompt_tokens = 512;
constexpr std::size_t generated_tokens = 512;
constexpr std::size_t extension = new_prompt_tokens + generated_tokens;

/// Minimum time per benchmark and repetition (seconds, --benchmark_min_time overrides it): the whole
/// program runs in about 6 seconds per repetition.
constexpr const char* default_min_time = "0.2";

/// `n` token ids, deterministic and varied (a 32-bit LCG), in the range of a real vocabulary.
Tokens make_tokens(std::size_t n, std::uint32_t seed) {
  Tokens t(n);
  std::uint32_t x = seed;
  for (auto& id : t) {
    x = x * 1664525u + 1013904223u;
    id = static_cast<pfx::token>(x >> 15);  // 0 .. 131071
  }
  return t;
}

Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void set_prefix_bytes(benchmark::State& state, std::size_t n) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(n * sizeof(pfx::token)));
}

void set_memory_counter(benchmark::State& state, const pfx::Machine& machine) {
  state.counters["mem_per_token"] = benchmark::Counter(
      static_cast<double>(machine.memory_bytes()) / static_cast<double>(machine.held().ids.size()));
}

/// A machine holding `n` tokens (canonical_end = n, capacity n), and a prompt that is those `n` ids
/// plus one more token: query compares all `n` and grants offset n.
struct QueryFixture {
  explicit QueryFixture(std::size_t n)
      : ids(make_tokens(n, 1)), prompt(concat(ids, make_tokens(1, 2))) {
    machine.reserve(n);  // the record's exact size: memory_bytes() is then 4 per token + a constant
    ok = machine.record(ids, n).accepted();
  }
  Tokens ids;
  Tokens prompt;
  pfx::Machine machine;
  bool ok = false;
};

void BM_Memcmp(benchmark::State& state, std::size_t n) {
  QueryFixture f(n);
  // The very bytes query compares: the machine's held ids and the prompt's first n tokens.
  const pfx::token* held = f.machine.held().ids.data();
  const pfx::token* prompt = f.prompt.data();
  const std::size_t bytes = n * sizeof(pfx::token);
  if (!f.ok || std::memcmp(held, prompt, bytes) != 0) {
    state.SkipWithError("setup: the held ids are not a prefix of the prompt");
    return;
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(held);
    benchmark::DoNotOptimize(prompt);
    int result = std::memcmp(held, prompt, bytes);
    benchmark::DoNotOptimize(result);
  }
  set_prefix_bytes(state, n);
}

void BM_Query(benchmark::State& state, std::size_t n) {
  QueryFixture f(n);
  const pfx::Outcome first = f.machine.query(f.prompt);
  if (!f.ok || !first.accepted() || first.decision.common_prefix != n ||
      first.decision.offset != n) {
    state.SkipWithError("setup: query does not compare and grant the whole record");
    return;
  }
  const std::span<const pfx::token> prompt(f.prompt);
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.machine);
    pfx::Outcome out = f.machine.query(prompt);
    benchmark::DoNotOptimize(out);
  }
  set_prefix_bytes(state, n);
  set_memory_counter(state, f.machine);
}

/// One request as a lane sees it: the prompt, and what is committed after decode (prompt +
/// generated), with canonical_end = len(prompt).
struct Request {
  Tokens prompt;
  Tokens ids;
};

/// A machine holding a base of `n` tokens, and two requests that each keep exactly those `n` tokens
/// and add 1024 more; their first new tokens differ. Served in turn, each request is granted offset n
/// against what the other left, so every iteration begins at n, verifies the n kept tokens and
/// appends 1024: a steady state with no reset between iterations.
struct CommitFixture {
  explicit CommitFixture(std::size_t n) {
    const Tokens base = make_tokens(n, 1);
    for (std::uint32_t k = 0; k < 2; ++k) {
      Tokens added = make_tokens(new_prompt_tokens, 10 + k);
      added[0] = static_cast<pfx::token>(200000 + k);  // the two requests diverge right after the base
      Request r;
      r.prompt = concat(base, added);
      r.ids = concat(r.prompt, make_tokens(generated_tokens, 20 + k));
      requests[k] = std::move(r);
    }
    machine.reserve(n + extension);  // once, as the KV state is allocated once at full capacity
    ok = machine.record(base, n).accepted();
  }

  /// begin the next request at offset n; false if the machine does not grant exactly that.
  bool begin(std::size_t n) {
    const Request& r = requests[next];
    const pfx::Outcome began = machine.begin(r.prompt, n);
    return began.accepted() && began.decision.offset == n;
  }
  /// commit the request begun last, and turn to the other one.
  pfx::Outcome commit() {
    const Request& r = requests[next];
    next ^= 1u;
    return machine.commit(r.ids, r.prompt.size());
  }

  std::array<Request, 2> requests;
  pfx::Machine machine;
  std::size_t next = 0;
  bool ok = false;
};

void BM_Commit(benchmark::State& state, std::size_t n) {
  CommitFixture f(n);
  const std::size_t capacity = f.machine.capacity();
  benchmark::DoNotOptimize(f.machine);
  for (auto _ : state) {
    if (!f.ok || !f.begin(n)) {
      state.SkipWithError("begin did not grant the kept prefix");
      break;
    }
    benchmark::ClobberMemory();
    const auto start = std::chrono::steady_clock::now();
    benchmark::ClobberMemory();
    pfx::Outcome out = f.commit();
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
    const auto stop = std::chrono::steady_clock::now();
    if (!out.accepted()) {
      state.SkipWithError("commit refused");
      break;
    }
    state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
  }
  if (f.machine.capacity() != capacity) state.SkipWithError("commit allocated");
  set_prefix_bytes(state, n);
  set_memory_counter(state, f.machine);
}

void BM_BeginCommit(benchmark::State& state, std::size_t n) {
  CommitFixture f(n);
  benchmark::DoNotOptimize(f.machine);
  for (auto _ : state) {
    const bool began = f.ok && f.begin(n);
    pfx::Outcome out = f.commit();
    benchmark::DoNotOptimize(out);
    if (!began || !out.accepted()) {
      state.SkipWithError("begin or commit refused");
      break;
    }
  }
  set_prefix_bytes(state, n);
  set_memory_counter(state, f.machine);
}

/// The cost of the two clock reads that bound BM_Commit's timed span, with nothing between them: what
/// BM_Commit adds to the commit itself.
void BM_ClockSpan(benchmark::State& state) {
  for (auto _ : state) {
    benchmark::ClobberMemory();
    const auto start = std::chrono::steady_clock::now();
    benchmark::ClobberMemory();
    const auto stop = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
  }
}

/// "BM_Query/1048576": the benchmark's name and its record size, as BENCHMARK(...)->Arg(n) names it.
std::string name(const char* benchmark, std::size_t n) {
  std::string out(benchmark);
  out += '/';
  out += std::to_string(n);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // Registered size by size, so that the figures to compare are printed next to each other.
  for (const std::size_t n : sizes) {
    benchmark::RegisterBenchmark(name("BM_Memcmp", n).c_str(), BM_Memcmp, n);
    benchmark::RegisterBenchmark(name("BM_Query", n).c_str(), BM_Query, n);
    benchmark::RegisterBenchmark(name("BM_Commit", n).c_str(), BM_Commit, n)->UseManualTime();
    benchmark::RegisterBenchmark(name("BM_BeginCommit", n).c_str(), BM_BeginCommit, n);
  }
  benchmark::RegisterBenchmark("BM_ClockSpan", BM_ClockSpan)->UseManualTime();

  return pfx::bench::run_benchmarks(argc, argv, default_min_time);
}
