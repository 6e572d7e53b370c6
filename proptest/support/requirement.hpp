#pragma once

/// \file
/// Tests record the requirement IDs they verify as a gtest property ("verifies"), so that the
/// requirements check (proptest/spec/requirements_check.cpp) fails when an invariant has no test.

#include <gtest/gtest.h>
// rapidcheck/gtest.h needs gtest/gtest.h first.
#include <rapidcheck/gtest.h>

namespace pfx::test {

/// Records that the running test verifies `ids` (for example "INV-1 INV-7 AUDIT-260").
inline void verifies(const char* ids) { ::testing::Test::RecordProperty("verifies", ids); }

}  // namespace pfx::test

/// A RapidCheck property run as a gtest test that records the requirement IDs it verifies.
#define PFX_PROPERTY(Suite, Name, Verifies, ArgList)          \
  void pfx_property_##Suite##_##Name ArgList;                 \
  TEST(Suite, Name) {                                         \
    ::pfx::test::verifies(Verifies);                          \
    ::rc::detail::checkGTest(&pfx_property_##Suite##_##Name); \
  }                                                           \
  void pfx_property_##Suite##_##Name ArgList
