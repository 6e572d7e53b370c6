#include <pfx/cli/audit_table.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace pfx::cli {

std::vector<std::string> TraceabilityEntry::problems() const {
  std::vector<std::string> out;
  if (!has_row) out.push_back(fmt::format("no row in the \"Requirements\" table of {}", traceability_doc));
  if (tests.empty()) out.push_back(fmt::format("no test in the \"Test index\" of {}", traceability_doc));
  return out;
}

std::vector<TraceabilityEntry> traceability_table(std::span<const RequirementId> ids,
                                                  std::span<const TracedRequirement> traced) {
  std::vector<TraceabilityEntry> table;
  for (const RequirementId& requirement : ids) {
    TraceabilityEntry entry{requirement.id, requirement.statement, false, "", {}, {}};
    const auto found = std::find_if(traced.begin(), traced.end(),
                                    [&](const TracedRequirement& t) { return t.id == requirement.id; });
    if (found != traced.end()) {
      entry.has_row = found->has_row;
      entry.enforced_in_core = found->enforced_in_core;
      entry.tests.assign(found->tests.begin(), found->tests.end());
      entry.docs.assign(found->docs.begin(), found->docs.end());
    }
    table.push_back(std::move(entry));
  }
  return table;
}

}  // namespace pfx::cli
