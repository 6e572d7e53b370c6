// What prefix reuse buys a lane, and what it costs (docs/performance.md, "The driver"). One program,
// so that the figures to compare are printed next to each other from one run.
//
//   BM_TtftCold/prompt:L/suffix:S        time to first token of a lane with reuse off serving an
//                                        L-token prompt (S only pairs it with the line below)
//   BM_TtftResumed/prompt:L/suffix:S     the same prompt on a lane that holds its first L - S tokens:
//                                        granted offset L - S, it prefills S tokens
//   BM_MachineRequest/record:N           query + begin + commit on a machine holding N tokens: the
//                                        machine's work for one request, as the lane does it
//   BM_ChunkPrefill/position:N           one chunk's prefill at position N: the least engine work a
//                                        request can cause at that length
//   BM_LaneOverhead/prompt:L/suffix:64   a served one-chunk request, with the lane's protocol and
//                                        poisoning times next to its prefill
//
// The ...OnDevice benchmarks are the same on the CUDA reference engine; they report why they are
// skipped when CUDA work cannot run here.
//
// Every request asks for one new token, so that the first token is the whole generation.

#include <pfx/core.hpp>
#include <pfx/driver/cuda.hpp>
#include <pfx/driver/engine.hpp>
#include <pfx/driver/generation.hpp>
#include <pfx/engines/host_reference_engine.hpp>
#include <pfx/engines/reference_engine_on_device.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/engines/reference_model.hpp>

#include <benchmark/benchmark.h>

#include "run_benchmarks.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using pfx::driver::Engine;
using pfx::driver::Lane;
using pfx::driver::LaneOptions;
using pfx::driver::Response;
using Tokens = std::vector<pfx::token>;

/// A small model, so that an 8K-token cold prefill takes about a second on one host core.
constexpr pfx::engines::ReferenceModelShape model{
    .vocab = 256, .width = 32, .hidden = 64, .layers = 2, .chunk = 64};

/// The lanes' keep_min: the seed's default.
constexpr std::size_t keep_min = 64;

/// Prompt lengths L and suffix lengths S (new tokens after the held prefix) for time to first token.
/// A pair is measured when L - S is at least keep_min. The cold 8K prefill dominates the run time.
constexpr std::array<std::size_t, 3> prompt_lengths{512, 2048, 8192};
constexpr std::array<std::size_t, 3> suffix_lengths{64, 256, 1024};

/// Record lengths for the protocol's cost next to one chunk's prefill. A one-chunk prefill at 1M
/// rows takes about six seconds on the host engine, with a 512 MB KV state: it runs once per
/// repetition, and its state is allocated per benchmark call rather than kept.
constexpr std::array<std::size_t, 3> record_lengths{std::size_t{1} << 13, std::size_t{1} << 16,
                                                    std::size_t{1} << 20};

/// Prompt lengths for the lane's own overhead; their resumed request prefills one chunk.
constexpr std::array<std::size_t, 2> overhead_prompt_lengths{2048, 8192};

/// Minimum time per benchmark and repetition (seconds, --benchmark_min_time overrides it). Requests
/// slower than this run once per repetition.
constexpr const char* default_min_time = "0.5";

enum class Backend { host, device };

/// Empty when `backend` can run here, otherwise why not.
std::string unavailable_reason(Backend backend) {
  return backend == Backend::host ? std::string{} : pfx::driver::cuda::unavailable_reason();
}

std::unique_ptr<Engine> make_engine(Backend backend) {
  if (backend == Backend::host) return std::make_unique<pfx::engines::HostReferenceEngine>(model);
  return std::make_unique<pfx::engines::cuda::ReferenceEngineOnDevice>(model);
}

/// Engines and resumable lanes that outlive one call of a benchmark function. Google Benchmark calls
/// a function several times while it settles the iteration count, and a resumable lane's setup (a
/// cold prefill of the whole prompt, a second at 8K) would otherwise be paid on each call. Owned by
/// main, so that device memory is released before the program exits.
class Fixtures {
 public:
  Engine& engine(Backend backend) {
    std::unique_ptr<Engine>& engine = engines_[backend];
    if (engine == nullptr) engine = make_engine(backend);
    return *engine;
  }

  /// A lane with reuse on and room for an L-token prompt and its one new token.
  Lane& resumable_lane(Backend backend, std::size_t prompt_length, bool poison) {
    std::unique_ptr<Lane>& lane = lanes_[{backend, prompt_length, poison}];
    if (lane == nullptr) {
      lane = std::make_unique<Lane>(engine(backend), LaneOptions{.capacity = prompt_length + 1,
                                                                 .config = {.enabled = true, .keep_min = keep_min},
                                                                 .poison = poison});
    }
    return *lane;
  }

 private:
  std::map<Backend, std::unique_ptr<Engine>> engines_;
  // Declared after the engines, so destroyed before them: a lane refers to its engine.
  std::map<std::tuple<Backend, std::size_t, bool>, std::unique_ptr<Lane>> lanes_;
};

/// `n` token ids, deterministic and varied (a 32-bit LCG), inside the model's vocabulary.
Tokens make_tokens(std::size_t n, std::uint32_t seed) {
  Tokens t(n);
  std::uint32_t x = seed;
  for (auto& id : t) {
    x = x * 1664525u + 1013904223u;
    id = static_cast<pfx::token>((x >> 16) % model.vocab);
  }
  return t;
}

/// `tokens` with every token from `from` on replaced by another one, so that the result and
/// `tokens` share exactly their first `from` tokens.
Tokens diverging_from(Tokens tokens, std::size_t from) {
  for (std::size_t i = from; i < tokens.size(); ++i) {
    tokens[i] = static_cast<pfx::token>((static_cast<std::size_t>(tokens[i]) + 1) % model.vocab);
  }
  return tokens;
}

Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

/// Serves a one-token request; on failure reports why and returns nothing.
std::optional<Response> serve(benchmark::State& state, Lane& lane, const Tokens& prompt) {
  try {
    return lane.serve(prompt, 1);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return std::nullopt;
  }
}

/// Sums what the lane timed over a benchmark's iterations, and reports it as counters.
class Tally {
 public:
  void add(const Response& response) {
    ttft_ += response.timings.first_token;
    protocol_ += response.timings.protocol;
    poison_ += response.timings.poison;
    prefill_ += response.timings.prefill;
    offset_ = response.decision.offset;
    prefilled_ = response.prefilled;
  }

  void report_ttft(benchmark::State& state) const {
    state.counters["offset"] = static_cast<double>(offset_);
    state.counters["prefilled"] = static_cast<double>(prefilled_);
    state.counters["ttft_ms"] =
        benchmark::Counter(seconds(ttft_) * 1e3, benchmark::Counter::kAvgIterations);
  }

  void report_overhead(benchmark::State& state) const {
    state.counters["protocol_us"] =
        benchmark::Counter(seconds(protocol_) * 1e6, benchmark::Counter::kAvgIterations);
    state.counters["poison_us"] =
        benchmark::Counter(seconds(poison_) * 1e6, benchmark::Counter::kAvgIterations);
    state.counters["prefill_ms"] =
        benchmark::Counter(seconds(prefill_) * 1e3, benchmark::Counter::kAvgIterations);
    if (prefill_.count() > 0) {
      state.counters["overhead_pct"] = 100.0 * seconds(protocol_ + poison_) / seconds(prefill_);
    }
  }

 private:
  std::chrono::nanoseconds ttft_{}, protocol_{}, poison_{}, prefill_{};
  std::size_t offset_ = 0;
  std::size_t prefilled_ = 0;
};

bool skip_if_unavailable(benchmark::State& state, Backend backend) {
  const std::string why = unavailable_reason(backend);
  if (why.empty()) return false;
  state.SkipWithError(why.c_str());
  return true;
}

/// A lane with reuse off serves the whole L-token prompt on every request.
void BM_TtftCold(benchmark::State& state, Fixtures* fixtures, Backend backend,
                 std::size_t prompt_length) {
  if (skip_if_unavailable(state, backend)) return;
  std::unique_ptr<Lane> lane;
  try {
    lane = std::make_unique<Lane>(fixtures->engine(backend),
                                  LaneOptions{.capacity = prompt_length + 1, .config = {.enabled = false}});
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  const Tokens prompt = make_tokens(prompt_length, 1);
  Tally tally;
  for (auto _ : state) {
    const std::optional<Response> response = serve(state, *lane, prompt);
    if (!response) break;
    if (response->decision.offset != 0 || response->prefilled != prompt_length) {
      state.SkipWithError("the cold lane reused rows");
      break;
    }
    state.SetIterationTime(seconds(response->timings.first_token));
    tally.add(*response);
  }
  tally.report_ttft(state);
}

/// Two L-token prompts that share exactly their first L - S tokens. Served in turn on one lane, each
/// is granted offset L - S against what the other left (the rule caps the offset at the common
/// prefix, and L - S is on the chunk grid), so every request prefills exactly S tokens, with no
/// untimed work between requests.
class AlternatingRequests {
 public:
  AlternatingRequests(std::size_t prompt_length, std::size_t suffix)
      : prompts_{make_tokens(prompt_length, 1),
                 diverging_from(make_tokens(prompt_length, 1), prompt_length - suffix)},
        offset_(prompt_length - suffix),
        suffix_(suffix) {}

  /// Makes the lane hold the first prompt (untimed), so that the first request is resumed too.
  bool prepare(benchmark::State& state, Lane& lane) {
    next_ = 1;
    return serve(state, lane, prompts_[0]).has_value();
  }

  /// Serves the next prompt; on failure, or when it was not granted offset L - S, reports why and
  /// returns nothing.
  std::optional<Response> serve_next(benchmark::State& state, Lane& lane) {
    std::optional<Response> response = serve(state, lane, prompts_[next_]);
    next_ ^= 1u;
    if (response && (response->decision.offset != offset_ || response->prefilled != suffix_)) {
      state.SkipWithError("the resumed request was not granted offset L - S");
      return std::nullopt;
    }
    return response;
  }

 private:
  std::array<Tokens, 2> prompts_;
  std::size_t offset_;
  std::size_t suffix_;
  std::size_t next_ = 0;
};

/// Resumed requests on a lane that holds the prompt's first L - S tokens, so that S tokens are
/// prefilled each time; each iteration is timed by the Timings field `timed`. nullopt when the
/// benchmark was skipped.
std::optional<Tally> serve_resumed(benchmark::State& state, Fixtures* fixtures, Backend backend,
                                   std::size_t prompt_length, std::size_t suffix, bool poison,
                                   std::chrono::nanoseconds pfx::driver::Timings::*timed) {
  if (skip_if_unavailable(state, backend)) return std::nullopt;
  Lane* lane = nullptr;
  try {
    lane = &fixtures->resumable_lane(backend, prompt_length, poison);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return std::nullopt;
  }
  AlternatingRequests requests(prompt_length, suffix);
  if (!requests.prepare(state, *lane)) return std::nullopt;
  Tally tally;
  for (auto _ : state) {
    const std::optional<Response> response = requests.serve_next(state, *lane);
    if (!response) break;
    state.SetIterationTime(seconds(response->timings.*timed));
    tally.add(*response);
  }
  return tally;
}

/// A lane holding the prompt's first L - S tokens serves it: S tokens are prefilled.
void BM_TtftResumed(benchmark::State& state, Fixtures* fixtures, Backend backend,
                    std::size_t prompt_length, std::size_t suffix) {
  const std::optional<Tally> tally = serve_resumed(state, fixtures, backend, prompt_length, suffix,
                                                   pfx::driver::poison_by_default,
                                                   &pfx::driver::Timings::first_token);
  if (tally) tally->report_ttft(state);
}

/// The lane's own work on a resumed one-chunk request, with poisoning on: query, begin and commit
/// (the lane's `protocol` time) and filling the given-up rows with NaN (`poison`), reported as
/// counters next to the request's prefill; overhead_pct is their sum over the prefill. The reported
/// time is the whole request's: timing only the overhead would make the benchmark serve hundreds of
/// thousands of requests to reach its minimum time.
void BM_LaneOverhead(benchmark::State& state, Fixtures* fixtures, Backend backend,
                     std::size_t prompt_length) {
  const std::optional<Tally> tally = serve_resumed(state, fixtures, backend, prompt_length, model.chunk,
                                                   /*poison=*/true, &pfx::driver::Timings::total);
  if (tally) tally->report_overhead(state);
}

/// A machine set up as a lane's (reuse on, keep_min, the engine's chunk, capacity reserved once)
/// holding N tokens, and two requests that keep exactly those N and add one chunk of prompt and one
/// generated token. Their first new tokens differ, so each is granted offset N against what the
/// other left: every iteration compares the N kept tokens three times (query, begin, commit) and
/// appends chunk + 1 tokens.
class MachineRequests {
 public:
  explicit MachineRequests(std::size_t n) : n_(n) {
    const Tokens base = make_tokens(n, 1);
    const Tokens added = make_tokens(model.chunk, 2);
    for (std::size_t k = 0; k < 2; ++k) {
      prompts_[k] = concat(base, k == 0 ? added : diverging_from(added, 0));
      ids_[k] = concat(prompts_[k], make_tokens(1, 3));
    }
    ok_ = machine_.configure({.enabled = true, .keep_min = keep_min, .chunk = model.chunk})
              .accepted();
    machine_.reserve(n + model.chunk + 1);
    ok_ = ok_ && machine_.record(base, n).accepted();
  }

  /// One request as Lane::serve makes it; false unless every call is accepted at offset N.
  bool serve() {
    const Tokens& prompt = prompts_[next_];
    const Tokens& ids = ids_[next_];
    next_ ^= 1u;
    const pfx::Outcome answer = machine_.query(prompt);
    const pfx::Outcome began = machine_.begin(prompt, answer.decision.offset);
    const pfx::Outcome committed = machine_.commit(ids, prompt.size());
    return ok_ && answer.accepted() && answer.decision.offset == n_ && began.accepted() &&
           committed.accepted();
  }

  [[nodiscard]] const pfx::Machine& machine() const noexcept { return machine_; }

 private:
  std::size_t n_;
  std::array<Tokens, 2> prompts_;
  std::array<Tokens, 2> ids_;
  pfx::Machine machine_;
  std::size_t next_ = 0;
  bool ok_ = false;
};

void BM_MachineRequest(benchmark::State& state, std::size_t n) {
  MachineRequests requests(n);
  const std::size_t capacity = requests.machine().capacity();
  for (auto _ : state) {
    const bool served = requests.serve();
    benchmark::DoNotOptimize(served);
    if (!served) {
      state.SkipWithError("the machine did not grant offset N");
      break;
    }
  }
  if (requests.machine().capacity() != capacity) state.SkipWithError("a commit allocated");
  state.counters["offset"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kDefaults,
                         benchmark::Counter::OneK::kIs1024);
}

/// One chunk prefilled at position N. Rows [0, N) stand for the held prefix: attention reads every
/// one of them, and finite values are all it needs (their values do not change its cost), so they
/// are filled rather than computed by a prefill of N tokens.
void BM_ChunkPrefill(benchmark::State& state, Fixtures* fixtures, Backend backend, std::size_t n) {
  if (skip_if_unavailable(state, backend)) return;
  try {
    Engine& engine = fixtures->engine(backend);
    const std::unique_ptr<pfx::driver::KvState> kv = engine.make_kv_state(n + engine.chunk());
    kv->fill(0, n, 0.01f);
    const Tokens chunk = make_tokens(engine.chunk(), 2);
    std::vector<float> logits(engine.vocab());
    for (auto _ : state) {
      engine.prefill(*kv, chunk, n, logits);  // returns with the logits on the host
      benchmark::DoNotOptimize(logits.data());
      benchmark::ClobberMemory();
    }
    if (!pfx::driver::all_finite(logits)) state.SkipWithError("the chunk's logits are not finite");
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  state.counters["position"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kDefaults,
                         benchmark::Counter::OneK::kIs1024);
}

/// "BM_TtftCold/prompt:512/suffix:64", or "BM_ChunkPrefill/position:8192" with no second argument.
std::string name(const char* benchmark, Backend backend, const char* first, std::size_t first_value,
                 const char* second = nullptr, std::size_t second_value = 0) {
  std::string out(benchmark);
  if (backend == Backend::device) out += "OnDevice";
  out += '/';
  out += first;
  out += ':';
  out += std::to_string(first_value);
  if (second != nullptr) {
    out += '/';
    out += second;
    out += ':';
    out += std::to_string(second_value);
  }
  return out;
}

void register_ttft(Fixtures* fixtures, Backend backend) {
  // Cold and resumed with the same arguments one after the other, so that each pair sits together.
  for (const std::size_t prompt_length : prompt_lengths) {
    for (const std::size_t suffix : suffix_lengths) {
      if (suffix > prompt_length || prompt_length - suffix < keep_min) continue;
      benchmark::RegisterBenchmark(
          name("BM_TtftCold", backend, "prompt", prompt_length, "suffix", suffix).c_str(),
          BM_TtftCold, fixtures, backend, prompt_length)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(
          name("BM_TtftResumed", backend, "prompt", prompt_length, "suffix", suffix).c_str(),
          BM_TtftResumed, fixtures, backend, prompt_length, suffix)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

void register_overhead(Fixtures* fixtures, Backend backend) {
  for (const std::size_t n : record_lengths) {
    // The machine's work is host work whichever engine the lane drives, so it is registered once.
    if (backend == Backend::host) {
      benchmark::RegisterBenchmark(name("BM_MachineRequest", backend, "record", n).c_str(),
                                   BM_MachineRequest, n)
          ->Unit(benchmark::kMicrosecond);
    }
    benchmark::RegisterBenchmark(name("BM_ChunkPrefill", backend, "position", n).c_str(),
                                 BM_ChunkPrefill, fixtures, backend, n)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  for (const std::size_t prompt_length : overhead_prompt_lengths) {
    benchmark::RegisterBenchmark(
        name("BM_LaneOverhead", backend, "prompt", prompt_length, "suffix", model.chunk).c_str(),
        BM_LaneOverhead, fixtures, backend, prompt_length)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Fixtures fixtures;
  for (const Backend backend : {Backend::host, Backend::device}) {
    register_ttft(&fixtures, backend);
    register_overhead(&fixtures, backend);
  }

  return pfx::bench::run_benchmarks(argc, argv, default_min_time);
}
