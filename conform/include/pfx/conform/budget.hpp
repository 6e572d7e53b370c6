#pragma once

/// \file
/// How much work one conformance check does (docs/conform.md, "The budget"): how many random prompts,
/// of which lengths, resumed at how many offsets, on which candidate grids.

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace pfx::conform {

struct Budget {
  /// Random prompts of each length.
  std::size_t prompts = 4;
  /// The candidate grids are 1, 2, 4, ... up to max_grid, plus the engine's chunk and the rule chunk.
  std::size_t max_grid = 64;
  /// A prompt of up to this many tokens is resumed at every offset of each grid; a longer one at
  /// `sampled_offsets` of them (the first, the last, and random others).
  std::size_t exhaustive_up_to = 96;
  std::size_t sampled_offsets = 24;
  /// Cold runs of each prompt (at least 2: two that differ mean the engine is not deterministic).
  std::size_t cold_runs = 2;
  /// The prompts, the offsets sampled and the held rows' tails are drawn from this seed.
  std::uint64_t seed = 1;

  /// The named budgets: "quick" (for tests), "default", "thorough". std::invalid_argument naming
  /// the choices for any other name.
  [[nodiscard]] static Budget named(std::string_view name);
  /// The names `named` takes.
  [[nodiscard]] static std::vector<std::string> names();

  /// Throws std::invalid_argument naming the field unless prompts, max_grid and sampled_offsets are
  /// at least 1 and cold_runs at least 2.
  void validate() const;

  friend bool operator==(const Budget&, const Budget&) = default;
};

/// The candidate grids for an engine whose prefill chunk is `chunk` and a rule chunk `rule_chunk`:
/// the powers of two up to budget.max_grid, `chunk` and `rule_chunk`, ascending, each once.
[[nodiscard]] std::vector<std::size_t> candidate_grids(const Budget& budget, std::size_t chunk,
                                                       std::size_t rule_chunk);

/// The prompt lengths checked for these grids: 2 and 3, and for each grid g the lengths g - 1, g,
/// g + 1, 2g - 1, 2g + 1 and 3g + 1 (those of at least 2), ascending, each once. Every grid is
/// resumed at least twice (offsets g and 2g of a prompt of 3g + 1 tokens).
[[nodiscard]] std::vector<std::size_t> prompt_lengths(const std::vector<std::size_t>& grids);

/// The offsets a prompt of n tokens is resumed at on grid g: the multiples of g in [g, n - 1]; all of
/// them for a prompt of up to budget.exhaustive_up_to tokens, else the first, the last and others drawn
/// from `random`, budget.sampled_offsets in all.
[[nodiscard]] std::vector<std::size_t> resume_offsets(std::size_t n, std::size_t g, const Budget& budget,
                                                      std::mt19937_64& random);

}  // namespace pfx::conform
