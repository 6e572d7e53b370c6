// The decode-context-parallel reference engine on the device (cuda::DcpReferenceEngineOnDevice):
// the host DCP engine's claims, run on a device. A resume on the chunk grid equals the cold run of
// the same ranks and interleave bit for bit, one rank per thread over a ThreadsCollective, and the
// ranks' rows and logits are the single controller's; and its logits and rows are the unsharded
// engine on the same device's (ReferenceEngineOnDevice) within pfx::test::dcp_tolerance, at the
// edges of every layout and over drawn ones. Each test that needs a device skips, with the reason,
// when there is none; the first runs everywhere and checks that the engine says why it cannot run.

#include "support/cuda_device.hpp"
#include "support/dcp_resume.hpp"
#include "support/dcp_unsharded.hpp"
#include "support/requirement.hpp"

#include <pfx/driver/cuda.hpp>
#include <pfx/driver/errors.hpp>
#include <pfx/driver/host_kv_state.hpp>
#include <pfx/driver/threads_collective.hpp>
#include <pfx/engines/dcp_reference_engine.hpp>
#include <pfx/engines/dcp_reference_engine_on_device.hpp>
#include <pfx/engines/reference_engine_on_device.hpp>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstddef>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using pfx::token;
using pfx::driver::ShardLayout;
using pfx::engines::cuda::DcpReferenceEngineOnDevice;
using pfx::engines::cuda::ReferenceEngineOnDevice;

constexpr std::size_t capacity = 160;

TEST(DcpOnDevice, TheEngineSaysWhyItCannotRunWhenItCannot) {
  pfx::test::verifies("DRV-6");
  const std::string reason = pfx::driver::cuda::unavailable_reason();
  if (reason.empty()) {
    const DcpReferenceEngineOnDevice engine({}, {2, 4});
    EXPECT_EQ(engine.context_parallel(), (ShardLayout{2, 4}));
    EXPECT_FALSE(engine.exchanges());
    return;
  }
  // Both forms: the single controller and one rank (of a group of one).
  pfx::driver::SoloCollective alone;
  for (pfx::driver::Collective* ranks : {static_cast<pfx::driver::Collective*>(nullptr),
                                         static_cast<pfx::driver::Collective*>(&alone)}) {
    try {
      const DcpReferenceEngineOnDevice engine({}, {1, 4}, ranks);
      ADD_FAILURE() << "the DCP engine was constructed on no device";
    } catch (const pfx::driver::CudaError& e) {
      EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
      std::cout << "as expected: " << e.what() << "\n";
    }
  }
}

TEST(DcpOnDevice, AResumeOnTheChunkGridEqualsTheColdRunOfTheSameRanksAndInterleave) {
  pfx::test::verifies("SHARD-5 SHARD-4 THM-1 DRV-6");
  PFX_REQUIRE_CUDA_DEVICE();
  EXPECT_TRUE(rc::check("a resume on the chunk grid equals the cold run, on every rank and the single controller",
                        [] { pfx::test::dcp_resume_on_the_chunk_grid_equals_cold<DcpReferenceEngineOnDevice>(capacity); }));
}

// Against the whole-state engine on the same device, not the host's: the device's floats need not
// equal the host's (its dot products fuse multiply-adds), while both device engines share every
// kernel but attention's, so they differ, as the host's two do, only in how attention adds its terms.
TEST(DcpOnDevice, AtTheEdgesOfEveryLayoutLogitsAndRowsAreTheUnshardedEnginesWithinTheFp32Tolerance) {
  pfx::test::verifies("SHARD-5 DRV-6");
  PFX_REQUIRE_CUDA_DEVICE();
  pfx::test::check_dcp_edges_against_unsharded<DcpReferenceEngineOnDevice, ReferenceEngineOnDevice>();
}

TEST(DcpOnDevice, LogitsAndRowsAreTheUnshardedEnginesWithinTheFp32Tolerance) {
  pfx::test::verifies("SHARD-5 DRV-6");
  PFX_REQUIRE_CUDA_DEVICE();
  pfx::test::check_dcp_logits_and_rows_against_unsharded<DcpReferenceEngineOnDevice, ReferenceEngineOnDevice>();
}

TEST(DcpOnDevice, ABadLayoutGroupOrKvStateIsRefused) {
  pfx::test::verifies("SHARD-4 DRV-6");
  PFX_REQUIRE_CUDA_DEVICE();
  pfx::driver::ThreadsCollective group(2);
  EXPECT_THROW(DcpReferenceEngineOnDevice({}, {0, 1}), std::invalid_argument);
  EXPECT_THROW(DcpReferenceEngineOnDevice({}, {2, 0}), std::invalid_argument);
  EXPECT_THROW(DcpReferenceEngineOnDevice({}, {3, 1}, &group.rank(0)), std::invalid_argument);

  DcpReferenceEngineOnDevice engine({}, {2, 4});
  std::vector<float> logits(engine.vocab());
  const std::vector<token> tokens{1, 2, 3};
  pfx::driver::HostKvState host({capacity, pfx::engines::ReferenceModelShape{}.layers,
                                 pfx::engines::ReferenceModelShape{}.width});
  const pfx::engines::DcpReferenceEngine on_host({}, {2, 4});
  const std::unique_ptr<pfx::driver::KvState> host_shards = on_host.make_kv_state(capacity);
  const DcpReferenceEngineOnDevice other_layout({}, {2, 1});
  const std::unique_ptr<pfx::driver::KvState> other = other_layout.make_kv_state(capacity);
  for (pfx::driver::KvState* foreign : {static_cast<pfx::driver::KvState*>(&host), host_shards.get(), other.get()}) {
    try {
      engine.prefill(*foreign, tokens, 0, logits);
      ADD_FAILURE() << "a foreign KV state was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("make_kv_state"), std::string::npos) << e.what();
    }
  }
  // Its own state works, and its rows are on the device.
  const std::unique_ptr<pfx::driver::KvState> own = engine.make_kv_state(capacity);
  engine.prefill(*own, tokens, 0, logits);
  EXPECT_EQ(own->copy_rows(0, tokens.size()).size(), tokens.size() * engine.model().layers * 2 * engine.model().width);
}

}  // namespace
