#include <pfx/conform/budget.hpp>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace pfx::conform {

Budget Budget::named(std::string_view name) {
  if (name == "quick") {
    return {.prompts = 1, .max_grid = 16, .exhaustive_up_to = 24, .sampled_offsets = 4, .cold_runs = 2, .seed = 1};
  }
  if (name == "default") return {};
  if (name == "thorough") {
    return {.prompts = 8, .max_grid = 256, .exhaustive_up_to = 160, .sampled_offsets = 48, .cold_runs = 3, .seed = 1};
  }
  throw std::invalid_argument("unknown budget '" + std::string(name) + "': expected quick, default or thorough");
}

std::vector<std::string> Budget::names() { return {"quick", "default", "thorough"}; }

void Budget::validate() const {
  if (prompts == 0) throw std::invalid_argument("budget: prompts must be at least 1");
  if (max_grid == 0) throw std::invalid_argument("budget: max_grid must be at least 1");
  if (sampled_offsets == 0) throw std::invalid_argument("budget: sampled_offsets must be at least 1");
  if (cold_runs < 2) {
    throw std::invalid_argument("budget: cold_runs must be at least 2 (a repeated cold run is what tells a "
                                "non-deterministic engine apart)");
  }
}

std::vector<std::size_t> candidate_grids(const Budget& budget, std::size_t chunk, std::size_t rule_chunk) {
  std::vector<std::size_t> grids;
  for (std::size_t g = 1; g <= budget.max_grid; g *= 2) grids.push_back(g);
  grids.push_back(chunk);
  grids.push_back(rule_chunk);
  std::sort(grids.begin(), grids.end());
  grids.erase(std::unique(grids.begin(), grids.end()), grids.end());
  return grids;
}

std::vector<std::size_t> prompt_lengths(const std::vector<std::size_t>& grids) {
  std::vector<std::size_t> lengths = {2, 3};
  for (const std::size_t g : grids) {
    for (const std::size_t n : {g - 1, g, g + 1, 2 * g - 1, 2 * g + 1, 3 * g + 1}) {
      if (n >= 2) lengths.push_back(n);
    }
  }
  std::sort(lengths.begin(), lengths.end());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  return lengths;
}

std::vector<std::size_t> resume_offsets(std::size_t n, std::size_t g, const Budget& budget, std::mt19937_64& random) {
  const std::size_t count = (n - 1) / g;
  std::vector<std::size_t> out;
  if (n <= budget.exhaustive_up_to || count <= budget.sampled_offsets) {
    for (std::size_t k = 1; k <= count; ++k) out.push_back(k * g);
    return out;
  }
  std::set<std::size_t> chosen = {1, count};
  while (chosen.size() < budget.sampled_offsets) chosen.insert(1 + random() % count);
  for (const std::size_t k : chosen) out.push_back(k * g);
  return out;
}

}  // namespace pfx::conform
