// A Lane used from several threads at once: serve() and clear() are serialized, so every response
// still equals a cold run bit for bit and the record and the KV state stay consistent. Run under
// ThreadSanitizer by scripts/tsan.sh, where any unsynchronized access fails the run.

#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/driver/lane.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using pfx::token;
using pfx::engines::HostReferenceEngine;
using pfx::driver::Lane;

constexpr std::size_t capacity = 96;
constexpr std::size_t max_new_tokens = 3;

struct Served {
  std::vector<token> prompt;
  pfx::driver::Response response;
};

/// Prompts that share prefixes with each other, so that concurrent requests would reuse each other's
/// rows if two of them ever ran at once.
std::vector<std::vector<token>> shared_prefix_prompts(std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<token> id(0, 15);
  std::vector<token> base(48);
  for (token& t : base) t = id(random);
  std::vector<std::vector<token>> prompts;
  for (std::size_t length = 9; length <= base.size(); length += 3) {
    std::vector<token> prompt(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(length));
    if (length % 2 == 0) prompt.back() = id(random);  // diverge at the last token
    prompts.push_back(prompt);
  }
  return prompts;
}

TEST(Concurrency, ALaneServedFromSeveralThreadsAtOnceStaysExact) {
  pfx::test::verifies("DRV-7");
  const std::uint64_t seed = std::random_device{}();
  std::cout << "seed " << seed << " (the prompts and each thread's choices)\n";
  const std::vector<std::vector<token>> prompts = shared_prefix_prompts(seed);
  HostReferenceEngine engine({.vocab = 16, .chunk = 3});
  Lane lane(engine, {.capacity = capacity, .config = {.enabled = true, .keep_min = 0}, .poison = true});

  constexpr std::size_t threads = 4;
  constexpr std::size_t requests_per_thread = 250;
  std::mutex served_lock;
  std::vector<Served> served;
  std::vector<std::string> errors;  // what a call threw, reported after the join
  std::vector<std::thread> workers;
  for (std::size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 random(seed + t + 1);
      try {
        for (std::size_t r = 0; r < requests_per_thread; ++r) {
          if (random() % 8 == 0) {
            lane.clear();
            continue;
          }
          const std::vector<token>& prompt = prompts[random() % prompts.size()];
          pfx::driver::Response response = lane.serve(prompt, max_new_tokens);
          const std::lock_guard<std::mutex> lock(served_lock);
          served.push_back({prompt, std::move(response)});
        }
      } catch (const std::exception& e) {
        const std::lock_guard<std::mutex> lock(served_lock);
        errors.emplace_back(e.what());
      }
    });
  }
  for (std::thread& worker : workers) worker.join();
  ASSERT_EQ(errors, std::vector<std::string>{}) << "seed " << seed;

  ASSERT_FALSE(served.empty());
  std::size_t reused = 0;
  for (const Served& s : served) {
    const pfx::test::Cold cold = pfx::test::cold_run(engine, capacity, s.prompt, max_new_tokens);
    ASSERT_TRUE(pfx::test::same_bits(s.response.logits, cold.logits)) << "seed " << seed;
    ASSERT_EQ(s.response.generated, cold.generated) << "seed " << seed;
    reused += s.response.decision.offset;
  }
  // The record is that of one whole request (or empty after a clear), never a mix of two.
  const pfx::Record& held = lane.machine().held();
  EXPECT_EQ(lane.machine().phase(), pfx::Phase::idle);
  if (!held.ids.empty()) {
    const std::vector<token> prompt(held.ids.begin(), held.ids.begin() + static_cast<std::ptrdiff_t>(held.canonical_end));
    const pfx::test::Cold cold = pfx::test::cold_run(engine, capacity, prompt, max_new_tokens);
    std::vector<token> whole = prompt;
    whole.insert(whole.end(), cold.generated.begin(), cold.generated.end());
    EXPECT_EQ(held.ids, whole) << "seed " << seed;
    EXPECT_TRUE(pfx::test::same_bits(lane.kv().copy_rows(0, lane.written_end()), cold.rows)) << "seed " << seed;
  }
  EXPECT_EQ(pfx::test::unpoisoned_row(lane), std::nullopt) << "seed " << seed;
  EXPECT_GT(reused, 0U) << "no request reused anything: the test would not see a race on the rows";
}

}  // namespace
