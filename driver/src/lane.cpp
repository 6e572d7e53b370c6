#include <pfx/driver/cold_run.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/driver/generation.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/prefill_step.hpp>

#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

namespace pfx::driver {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::nanoseconds since(Clock::time_point start) { return Clock::now() - start; }

/// A machine refusal here is a bug in the lane, not in the request.
void expect_accepted(const Outcome& outcome, const char* event) {
  if (!outcome.accepted()) {
    throw std::logic_error(std::string("Lane: the machine refused ") + event + ": " +
                           std::string(describe(outcome.refusal)));
  }
}

}  // namespace

std::size_t resolved_rule_chunk(std::optional<std::size_t> rule_chunk, std::size_t engine_chunk) noexcept {
  return rule_chunk.value_or(engine_chunk);
}

Lane::Lane(Engine& engine, const LaneOptions& options, BeforeCommit* before_commit)
    : engine_(engine), options_(options), before_commit_(before_commit) {
  if (options.capacity == 0) throw ConfigError("Lane: capacity must be at least 1 token");
  if (engine.chunk() == 0) throw ConfigError("Lane: the engine's prefill chunk must be at least 1");
  if (engine.vocab() == 0) throw ConfigError("Lane: the engine's vocabulary is empty");
  if (options.config.chunk != Config{}.chunk) {
    throw ConfigError("Lane: options.config.chunk is " + std::to_string(options.config.chunk) +
                      ", but a lane's rule chunk is options.rule_chunk (absent: the engine's chunk); leave "
                      "config.chunk at its default");
  }
  if (options.rule_chunk == std::optional<std::size_t>(0)) {
    throw ConfigError("Lane: options.rule_chunk must be at least 1 (absent: the engine's chunk), not 0");
  }
  Config rule = options.config;  // every knob as given, one added to Config later included
  rule.chunk = resolved_rule_chunk(options.rule_chunk, engine.chunk());
  expect_accepted(machine_.configure(rule), "configure");
  try {
    kv_ = engine.make_kv_state(options.capacity);
    machine_.reserve(options.capacity);  // MEM-1: commits never reallocate
    ids_.reserve(options.capacity);
  } catch (const std::bad_alloc&) {  // a capacity at full width may not fit memory: say which
    throw ConfigError("Lane: cannot allocate a KV state and record of " + std::to_string(options.capacity) +
                      " token rows: not enough memory");
  } catch (const std::length_error& e) {
    throw ConfigError(std::string("Lane: capacity ") + std::to_string(options.capacity) + " is too large: " + e.what());
  }
  if (kv_ == nullptr || kv_->shape().capacity != options.capacity) {
    throw ConfigError("Lane: the engine's KV state does not have the requested capacity");
  }
  // A cache the engine owns may hold rows of an earlier user: the lane starts from none. Rows never
  // written read like poisoned ones, whatever a state in pfx's memory starts with.
  forget_rows(*kv_, 0, options.capacity, options.poison);
}

void Lane::check_request(std::span<const token> prompt, std::size_t max_new_tokens) const {
  if (prompt.empty()) throw RequestError("Lane::serve: the prompt is empty (at least one token is needed)");
  const std::size_t vocab = engine_.vocab();
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || static_cast<std::size_t>(prompt[i]) >= vocab) {
      throw RequestError("Lane::serve: prompt token " + std::to_string(i) + " is " + std::to_string(prompt[i]) +
                         ", outside the vocabulary 0.." + std::to_string(vocab - 1));
    }
  }
  const std::size_t capacity = options_.capacity;
  if (prompt.size() > capacity || max_new_tokens > capacity - prompt.size()) {
    throw RequestError("Lane::serve: " + std::to_string(prompt.size()) + " prompt tokens + " +
                       std::to_string(max_new_tokens) + " new tokens do not fit the KV state's " +
                       std::to_string(capacity) + " rows");
  }
}

Response Lane::serve(std::span<const token> prompt, std::size_t max_new_tokens) {
  const std::lock_guard<std::mutex> one_request_at_a_time(serving_);
  const Clock::time_point start = Clock::now();
  check_request(prompt, max_new_tokens);  // before anything is written

  Response response;
  Clock::time_point t = Clock::now();
  const Outcome answer = machine_.query(prompt);
  expect_accepted(answer, "query");
  response.decision = answer.decision;
  last_decision_ = answer.decision;
  expect_accepted(machine_.begin(prompt, answer.decision.offset), "begin");  // INV-8: record shrinks
  response.timings.protocol += since(t);
  bool wrote = false;
  try {
    write(prompt, max_new_tokens, response, start);
    wrote = true;
    if (before_commit_ != nullptr) before_commit_->agree(true);  // a sharded lane's ranks agree here
    t = Clock::now();
    // canonical_end: AUDIT-260; under a prefill step, not a last row its prefill computed alone
    const std::size_t canonical_end = prefill_canonical_end(prompt.size(), machine_.config().prefill_step);
    // Where decode rows are exact the rule may grant every row the record holds: it then names only
    // tokens whose rows were written, not the last one generated, which no decode step has fed.
    const std::span<const token> committed =
        machine_.config().decode_rows_exact
            ? std::span<const token>(ids_).first(rows_written(prompt.size(), max_new_tokens))
            : std::span<const token>(ids_);
    expect_accepted(machine_.commit(committed, canonical_end), "commit");
    response.timings.protocol += since(t);
  } catch (...) {
    machine_.abort();  // INV-8: the record keeps rows [0, offset), which this request did not touch
    // This request failed here: it still takes part in the agreement, so that the others abort too.
    if (!wrote && before_commit_ != nullptr) before_commit_->agree(false);
    throw;
  }
  response.timings.total = since(start);
  return response;
}

void Lane::write(std::span<const token> prompt, std::size_t max_new_tokens, Response& response,
                 Clock::time_point start) {
  const std::size_t offset = response.decision.offset;
  Clock::time_point t = Clock::now();
  // INV-8's one-way flow: rows past the offset are given up before the engine writes again (an
  // engine's own cache drops them, so that its next write continues rows [0, offset)).
  if (offset < written_end_) forget_rows(*kv_, offset, written_end_, options_.poison);
  written_end_ = offset;  // rows past the offset no longer hold anything this lane vouches for
  response.timings.poison = since(t);

  t = Clock::now();
  response.logits.resize(engine_.vocab());
  const auto check_logits = [&](std::size_t begin, std::size_t end) {
    if (!all_finite(response.logits)) {
      throw StaleRowRead("Lane::serve: the logits of prefill chunk [" + std::to_string(begin) + ", " +
                         std::to_string(end) + ") are not finite: the engine read a poisoned or unwritten "
                         "KV row (or overflowed)");
    }
  };
  std::size_t chunk_begin = offset;
  prefill_on_grid(engine_, *kv_, prompt, offset, response.logits, [&](std::size_t begin, std::size_t end) {
    if (begin > offset) check_logits(chunk_begin, begin);  // every chunk's logits, not only the last
    chunk_begin = begin;
    written_end_ = end;  // before the call: a failing engine may have written some of the rows
  });
  check_logits(chunk_begin, prompt.size());
  response.prefilled = prompt.size() - offset;
  response.timings.prefill = since(t);

  ids_.assign(prompt.begin(), prompt.end());
  response.generated.clear();
  response.generated.reserve(max_new_tokens);
  if (max_new_tokens > 0) response.generated.push_back(argmax(response.logits));
  response.timings.first_token = since(start);

  t = Clock::now();
  std::vector<float> step_logits(engine_.vocab());
  for (std::size_t position = prompt.size(); response.generated.size() < max_new_tokens; ++position) {
    written_end_ = position + 1;
    engine_.decode(*kv_, response.generated.back(), position, step_logits);
    if (!all_finite(step_logits)) {
      throw StaleRowRead("Lane::serve: the logits of decode step at position " + std::to_string(position) +
                         " are not finite: the engine read a poisoned or unwritten KV row (or overflowed)");
    }
    response.generated.push_back(argmax(step_logits));
  }
  kv_->synchronize();  // every row is written before the record claims it
  response.timings.decode = since(t);
  ids_.insert(ids_.end(), response.generated.begin(), response.generated.end());
}

void Lane::clear() {
  const std::lock_guard<std::mutex> not_during_a_request(serving_);
  machine_.clear();
}

}  // namespace pfx::driver
