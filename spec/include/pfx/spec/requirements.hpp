#pragma once

/// \file
/// The requirements beside the invariant catalogue that pfx::core promises and the tests verify:
/// the seed's audits, the seed's rule, and the memory bound. Like every INV of the catalogue, each
/// must have a test (proptest/requirements_check.cpp).

#include <array>
#include <string_view>

namespace pfx::spec {

struct Requirement {
  std::string_view id;
  std::string_view statement;
};

inline constexpr std::array requirements = {
    Requirement{"AUDIT-253", "a stale KV is never read as the current context"},
    Requirement{"AUDIT-259", "reuse is on by default, with the seed's keep_min"},
    Requirement{"AUDIT-260", "a row decode wrote is never offered for reuse"},
    Requirement{"SEED-1", "with chunk = 1 the offset equals the seed's rule"},
    Requirement{"MEM-1",
                "4 bytes per token of capacity plus a constant; commits within the reserved "
                "capacity never reallocate"},
};

}  // namespace pfx::spec
