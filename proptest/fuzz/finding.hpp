#pragma once

/// \file
/// How a fuzz target reports a finding: one clear message on stderr, then abort. Aborting (rather
/// than throwing or returning) makes the same input fail under libFuzzer, which saves it as a crash
/// artifact, and under the plain replay of proptest/fuzz/replay_main.cpp, which fails its ctest.

#include <cstdlib>
#include <iostream>
#include <string_view>

namespace pfx::fuzz {

/// Prints "pfx fuzz <target>: finding: " and the parts (anything std::ostream prints), and aborts.
template <class... Parts>
[[noreturn]] void report_finding(std::string_view target, const Parts&... parts) {
  std::cerr << "pfx fuzz " << target << ": finding: ";
  (std::cerr << ... << parts) << std::endl;
  std::abort();
}

}  // namespace pfx::fuzz
