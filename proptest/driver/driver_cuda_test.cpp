// The CUDA backend: the same claims as on the host (THM-1, one allocation, poisoning, faults), run on
// a device. Each test that needs one skips, with the reason, when there is none; the first test runs
// everywhere and checks that the backend says why it cannot run.

#include "support/cuda_device.hpp"
#include "support/lanes.hpp"
#include "support/requirement.hpp"

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/engines/faulty_engine.hpp>
#include <pfx/engines/reference_engine_on_device.hpp>
#include <pfx/driver/generation.hpp>
#include <pfx/driver/lane.hpp>
#include <pfx/machine.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace {

using pfx::token;
using pfx::driver::Lane;
using pfx::driver::cuda::KvStateOnDevice;
using pfx::engines::cuda::ReferenceEngineOnDevice;

constexpr std::size_t capacity = 256;

TEST(Cuda, TheBackendSaysWhyItCannotRunWhenItCannot) {
  pfx::test::verifies("DRV-6");
  const std::string reason = pfx::driver::cuda::unavailable_reason();
  std::cout << "CUDA backend: " << (reason.empty() ? "a device is present" : reason) << "\n";
  if (!pfx::driver::cuda::built_with_cuda()) {
    EXPECT_NE(reason.find("built without a CUDA compiler"), std::string::npos) << reason;
  }
  if (reason.empty()) {
    const KvStateOnDevice kv({.capacity = 4, .layers = 2, .width = 4});
    EXPECT_EQ(kv.memory_bytes(), sizeof(float) * 4 * 2 * 2 * 4);
    return;
  }
  EXPECT_NE(reason.find(pfx::driver::cuda::built_with_cuda() ? "no CUDA device" : "without"), std::string::npos);
  // Without a device every entry point fails with a CudaError that says what failed.
  try {
    const KvStateOnDevice kv({.capacity = 4, .layers = 2, .width = 4});
    ADD_FAILURE() << "a KV state was allocated on no device";
  } catch (const pfx::driver::CudaError& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
    std::cout << "as expected: " << e.what() << "\n";
  }
  EXPECT_THROW(ReferenceEngineOnDevice engine(pfx::engines::ReferenceModelShape{}), pfx::driver::CudaError);
}

TEST(Cuda, AfterAnyMixOfFailuresEveryResponseEqualsAColdRunBitForBit) {
  PFX_REQUIRE_CUDA_DEVICE();
  pfx::test::verifies("THM-1 DRV-2 DRV-4 DRV-6");
  rc::detail::checkGTest([] {
    const pfx::engines::ReferenceModelShape shape = *pfx::test::model_shapes();
    const std::size_t keep_min = *rc::gen::element<std::size_t>(0, 1, 5, 16);
    const double rate = *rc::gen::element(0.0, 0.2);
    const auto steps = *rc::gen::container<std::vector<pfx::test::TraceStep>>(pfx::test::trace_steps(shape.vocab));
    ReferenceEngineOnDevice engine(shape);
    pfx::test::PoisonAuditingEngine audited(engine);
    pfx::engines::FaultyEngine faulty(audited, rate, shape.seed);
    Lane lane(faulty, {.capacity = capacity, .config = {.enabled = true, .keep_min = keep_min}, .poison = true});
    pfx::test::TraceBuilder trace(shape.vocab, capacity, shape.seed);
    const pfx::test::TraceReplay replay = pfx::test::replay_against_cold(lane, engine, capacity, steps, trace);
    RC_CLASSIFY(replay.reused > 0, "some rows reused");
    RC_CLASSIFY(replay.failures > 0, "some requests failed");
  });
}

TEST(Cuda, TheSeedsRuleWithChunkOneBreaksBitExactnessOnTheDevice) {
  PFX_REQUIRE_CUDA_DEVICE();
  pfx::test::verifies("CEX-1 DRV-6");
  ReferenceEngineOnDevice engine({.vocab = 64, .width = 16, .hidden = 32, .layers = 2, .chunk = 8, .seed = 253});
  std::mt19937_64 random(1);
  std::size_t mismatches = 0;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<token> held(17 + random() % 40);
    for (token& t : held) t = static_cast<token>(random() % 64);
    std::vector<token> prompt = held;
    prompt.insert(prompt.end(), {1, 2, 3});
    pfx::Machine rule;
    ASSERT_TRUE(rule.configure({.enabled = true, .keep_min = 0, .chunk = 1}).accepted());
    ASSERT_TRUE(rule.record(held, held.size()).accepted());
    const std::size_t offset = rule.query(prompt).decision.offset;

    const auto kv = engine.make_kv_state(capacity);
    const auto cold_kv = engine.make_kv_state(capacity);
    std::vector<float> logits(64), cold_logits(64);
    pfx::driver::prefill_on_grid(engine, *kv, held, 0, logits);
    pfx::driver::prefill_on_grid(engine, *kv, prompt, offset, logits);
    pfx::driver::prefill_on_grid(engine, *cold_kv, prompt, 0, cold_logits);
    mismatches += pfx::test::same_bits(logits, cold_logits) ? 0 : 1;
  }
  EXPECT_GT(mismatches, 0U);
  std::cout << "chunk = 1 on the device: " << mismatches << " of 20 resumed runs differ from cold\n";
}

TEST(Cuda, TheKvStateIsAllocatedOnceAndPoisoned) {
  PFX_REQUIRE_CUDA_DEVICE();
  pfx::test::verifies("DRV-1 DRV-2 DRV-6");
  ReferenceEngineOnDevice engine({.vocab = 32, .width = 8, .hidden = 16, .layers = 2, .chunk = 4, .seed = 5});
  Lane lane(engine, {.capacity = 64, .config = {.enabled = true, .keep_min = 0}, .poison = true});
  const auto& kv = dynamic_cast<const KvStateOnDevice&>(lane.kv());
  const float* allocation = kv.device_data();
  for (const float x : kv.copy_rows(0, 64)) ASSERT_TRUE(std::isnan(x));
  const std::vector<token> first = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  (void)lane.serve(first, 6);
  std::vector<token> second(first.begin(), first.begin() + 12);
  second.push_back(30);
  (void)lane.serve(second, 0);  // reuses 12, rewrites 12; rows 13..24 given up
  for (const float x : kv.copy_rows(13, 25)) ASSERT_TRUE(std::isnan(x));
  for (const float x : kv.copy_rows(0, 13)) ASSERT_FALSE(std::isnan(x));
  EXPECT_EQ(kv.device_data(), allocation);
  EXPECT_EQ(kv.memory_bytes(), sizeof(float) * 64 * 2 * 2 * 8);
}

TEST(Cuda, AnEngineThatReadsARowTheLaneGaveUpIsCaughtOnTheDevice) {
  PFX_REQUIRE_CUDA_DEVICE();
  pfx::test::verifies("DRV-2 DRV-6");
  ReferenceEngineOnDevice engine({.vocab = 32, .width = 8, .hidden = 16, .layers = 2, .chunk = 4, .seed = 5});
  pfx::test::PeekingEngine peeking(engine);
  Lane lane(peeking, {.capacity = 64, .config = {.enabled = true, .keep_min = 0}, .poison = true});
  const std::vector<token> first = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  (void)lane.serve(first, 6);
  std::vector<token> second(first.begin(), first.begin() + 12);
  second.insert(second.end(), {30, 31, 30, 31});
  peeking.peek = true;  // the first chunk [12, 16) peeks at row 16, which the request gave up
  EXPECT_THROW((void)lane.serve(second, 0), pfx::driver::StaleRowRead);
  EXPECT_EQ(lane.machine().held().ids, std::vector<token>(first.begin(), first.begin() + 12));
}

}  // namespace
