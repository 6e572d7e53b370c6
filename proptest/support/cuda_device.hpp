#pragma once

/// \file
/// PFX_REQUIRE_CUDA_DEVICE(): the first line of a test that needs a CUDA device; without one the
/// test is skipped, saying why (pfx::driver::cuda::unavailable_reason()).

#include <pfx/driver/cuda.hpp>

#include <gtest/gtest.h>

#include <string>

#define PFX_REQUIRE_CUDA_DEVICE()                                                \
  do {                                                                           \
    const std::string reason = pfx::driver::cuda::unavailable_reason();          \
    if (!reason.empty()) GTEST_SKIP() << "CUDA tests need a device: " << reason; \
  } while (false)
