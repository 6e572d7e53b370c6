#pragma once

/// \file
/// The errors the driver reports. Each message names the problem; a request that fails leaves the
/// record holding only rows that are still valid.

#include <stdexcept>

namespace pfx::driver {

/// A request the lane refuses before writing anything: empty prompt, token outside the vocabulary,
/// more tokens than the KV state holds. The record and the KV state are unchanged.
class RequestError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A malformed setting (for example TF_GLM53_PREFIX_CACHE_MIN=abc).
class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// The engine produced non-finite logits: it read a poisoned (stale or never written) KV row, or
/// its arithmetic overflowed. The request was aborted.
class StaleRowRead : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A CUDA call failed; the message names the call and CUDA's description of the error.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace pfx::driver
