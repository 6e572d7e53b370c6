// The DCP reference engine against unsharded attention (SHARD-5's merge): for ranks {1, 2, 3, 4, 8}
// x interleave {1, 4, 16}, the logits of every prefill call and decode step of the DCP engine's
// single controller, and every KV row it writes, are within pfx::test::dcp_tolerance of the
// whole-state HostReferenceEngine's given the same calls. The resume properties of
// driver_dcp_test.cpp compare the engine with itself (and its ranks with the single controller, bit
// for bit), so a merge that weighs the ranks' partials wrongly passes them; it fails here. Each test
// prints the largest differences it saw, the figures of docs/driver.md: the edges' are the same on
// every run, the property's follow its seed.

#include "support/dcp_unsharded.hpp"
#include "support/requirement.hpp"

#include <pfx/engines/dcp_reference_engine.hpp>
#include <pfx/engines/host_reference_engine.hpp>

#include <gtest/gtest.h>

namespace {

using pfx::engines::DcpReferenceEngine;
using pfx::engines::HostReferenceEngine;

TEST(Dcp, AtTheEdgesOfEveryLayoutLogitsAndRowsAreTheUnshardedEnginesWithinTheFp32Tolerance) {
  pfx::test::verifies("SHARD-5");
  pfx::test::check_dcp_edges_against_unsharded<DcpReferenceEngine, HostReferenceEngine>();
}

TEST(Dcp, LogitsAndRowsAreTheUnshardedEnginesWithinTheFp32Tolerance) {
  pfx::test::verifies("SHARD-5");
  pfx::test::check_dcp_logits_and_rows_against_unsharded<DcpReferenceEngine, HostReferenceEngine>();
}

}  // namespace
