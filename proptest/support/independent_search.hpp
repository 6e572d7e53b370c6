#pragma once

/// \file
/// A second count of the model checker's search (spec/refinement/include/pfx/refinement/
/// model_checker.hpp), written again from the domain's description in docs/spec.md and sharing no
/// code with the checker but the machine, the ghost and the reference's granted offset: a plain
/// breadth-first search by number of requests. The tests compare its states, transitions and offers
/// per depth with the checker's, so that a checker that silently explores less (skips a depth, drops
/// an event, merges states it should not) fails.

#include <pfx/refinement/bridge.hpp>
#include <pfx/refinement/model_checker.hpp>

#include <pfx/core.hpp>
#include <pfx/spec/ghost.hpp>
#include <pfx/spec/model.hpp>
#include <pfx/spec/reference.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

namespace pfx::test {

/// What the second count saw: per depth (requests), and how many new states one more request past
/// the last depth reaches (0: the reachable set is closed, a fixpoint).
struct IndependentCount {
  std::vector<refinement::DepthCount> depths;
  std::size_t beyond = 0;
};

namespace independent {

/// Every token sequence of length 0..n over {0, 1, ..., alphabet-1}.
inline std::vector<spec::Tokens> all_prompts(std::size_t alphabet, std::size_t n) {
  std::vector<spec::Tokens> out;
  std::vector<spec::Tokens> last{spec::Tokens{}};
  out.push_back({});
  for (std::size_t len = 1; len <= n; ++len) {
    std::vector<spec::Tokens> grown;
    for (const spec::Tokens& t : last) {
      for (std::size_t a = 0; a < alphabet; ++a) {
        spec::Tokens u = t;
        u.push_back(static_cast<spec::Token>(a));
        grown.push_back(u);
      }
    }
    out.insert(out.end(), grown.begin(), grown.end());
    last = std::move(grown);
  }
  return out;
}

/// The state as numbers, each token t written as map(t).
template <class Map>
std::vector<std::int32_t> numbers(const spec::State& s, const spec::Ghost& g, Map map) {
  std::vector<std::int32_t> v;
  v.reserve(256);
  const auto tokens = [&](const spec::Tokens& t) {
    v.push_back(static_cast<std::int32_t>(t.size()));
    for (const spec::Token x : t) v.push_back(map(x));
  };
  v.push_back(s.config.enabled);
  v.push_back(static_cast<std::int32_t>(s.config.keep_min));
  v.push_back(static_cast<std::int32_t>(s.config.chunk));
  v.push_back(s.config.decode_rows_exact);
  tokens(s.ids);
  v.push_back(static_cast<std::int32_t>(s.canonical_end));
  v.push_back(s.writing);
  v.push_back(static_cast<std::int32_t>(s.begin_offset));
  tokens(s.begun);
  v.push_back(s.tainted);
  v.push_back(static_cast<std::int32_t>(g.grid));
  v.push_back(g.exact);
  v.push_back(g.writing);
  tokens(g.request);
  v.push_back(static_cast<std::int32_t>(g.from_row));
  v.push_back(g.forgotten);
  v.push_back(static_cast<std::int32_t>(g.rows.size()));
  for (const spec::Row& r : g.rows) {
    v.push_back(static_cast<std::int32_t>(r.origin));
    tokens(r.from);
    v.push_back(static_cast<std::int32_t>(r.start));
    v.push_back(static_cast<std::int32_t>(r.end));
    v.push_back(static_cast<std::int32_t>(r.grid));
    v.push_back(r.cold_basis);
    v.push_back(r.exact);
  }
  return v;
}

/// One state and its image with the two letters swapped are one state (docs/spec.md, "symmetry"):
/// the lesser of the two, as bytes.
inline std::string identity(const Machine& m, const spec::Ghost& g, std::size_t alphabet) {
  const spec::State s = refinement::to_spec(m);
  std::vector<std::int32_t> v = numbers(s, g, [](spec::Token t) { return std::int32_t{t}; });
  if (alphabet == 2) v = std::min(v, numbers(s, g, [](spec::Token t) { return std::int32_t{1} - t; }));
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(std::int32_t)};
}

/// The events of the domain's alphabet applied to a state (docs/spec.md, the table of the domain).
inline std::vector<spec::Event> alphabet_of(const spec::State& s, const refinement::ModelDomain& d,
                                            const std::vector<spec::Tokens>& prompts) {
  std::vector<spec::Event> out;
  out.emplace_back(spec::Clear{});
  out.emplace_back(spec::Abort{});
  if (s.writing) {
    for (const spec::Tokens& tail : all_prompts(d.alphabet, d.max_generated)) {
      spec::Tokens ids = s.begun;
      for (const spec::Token t : tail) ids.push_back(t);
      for (std::size_t e = 0; e <= ids.size() + 1; ++e) out.emplace_back(spec::Commit{ids, e});
    }
    for (std::size_t i = 0; i < s.begun.size(); ++i) {
      spec::Tokens changed = s.begun;
      changed[i] = static_cast<spec::Token>((changed[i] + 1) % static_cast<spec::Token>(d.alphabet));
      out.emplace_back(spec::Commit{changed, changed.size()});
    }
    if (!s.begun.empty()) {
      const spec::Tokens less(s.begun.begin(), s.begun.end() - 1);
      out.emplace_back(spec::Commit{less, less.size()});
    }
    out.emplace_back(spec::Query{s.begun});
    out.emplace_back(spec::Begin{s.begun, 0});
    out.emplace_back(spec::Record{s.begun, 0});
    out.emplace_back(spec::Configure{s.config});
    return out;
  }
  for (const spec::Tokens& p : prompts) {
    const std::size_t granted = spec::reference_offset(s, p);
    out.emplace_back(spec::Begin{p, 0});
    if (granted > 0) out.emplace_back(spec::Begin{p, granted});
    out.emplace_back(spec::Begin{p, granted + 1});
    if (!p.empty()) out.emplace_back(spec::Record{p, p.size() - 1});
    out.emplace_back(spec::Record{p, p.size()});
  }
  out.emplace_back(spec::Record{prompts.back(), prompts.back().size() + 1});
  for (std::size_t chunk = 0; chunk <= d.max_chunk; ++chunk) {
    for (std::size_t keep_min = 0; keep_min <= d.max_keep_min; ++keep_min) {
      out.emplace_back(spec::Configure{{true, keep_min, chunk}});
    }
    if (chunk < d.max_prompt) out.emplace_back(spec::Configure{{true, 0, chunk, 0, 0, true}});
    out.emplace_back(spec::Configure{{false, 0, chunk}});
  }
  out.emplace_back(spec::Commit{{}, 0});
  return out;
}

}  // namespace independent

/// Breadth-first search of the domain by number of requests (an accepted begin or record), up to
/// `max_depth` requests: a depth's states are every state its predecessors reach by events that are
/// not requests, then the next depth's are those a request reaches, less those already seen.
inline IndependentCount count_independently(const refinement::ModelDomain& d, std::size_t max_depth) {
  struct State {
    Machine machine;
    spec::Ghost ghost;
  };
  const std::vector<spec::Tokens> prompts = independent::all_prompts(d.alphabet, d.max_prompt);
  std::unordered_set<std::string> seen;
  std::vector<State> frontier{State{}};
  seen.insert(independent::identity(frontier[0].machine, frontier[0].ghost, d.alphabet));
  IndependentCount result;
  for (std::size_t depth = 0;; ++depth) {
    refinement::DepthCount count;
    std::unordered_map<std::string, State> requested;  // one request on, by identity
    for (std::size_t i = 0; i < frontier.size(); ++i) {
      const State here = frontier[i];
      ++count.states;
      if (here.machine.phase() == Phase::idle) {
        for (const spec::Tokens& p : prompts) {
          ++count.offers;
          if (here.machine.query(p).decision.offset > 0) ++count.nonzero_offers;
        }
      }
      for (const spec::Event& e : independent::alphabet_of(refinement::to_spec(here.machine), d, prompts)) {
        ++count.transitions;
        Machine machine = here.machine;
        if (!machine.apply(refinement::to_core(e)).accepted()) continue;  // changes nothing (INV-10, checked elsewhere)
        State there{std::move(machine), here.ghost};
        spec::follow(there.ghost, e, true);
        std::string id = independent::identity(there.machine, there.ghost, d.alphabet);
        if (std::holds_alternative<spec::Begin>(e) || std::holds_alternative<spec::Record>(e)) {
          if (!seen.contains(id)) requested.try_emplace(std::move(id), std::move(there));
        } else if (seen.insert(std::move(id)).second) {
          frontier.push_back(std::move(there));
        }
      }
    }
    result.depths.push_back(count);
    std::vector<State> next;
    for (auto& [id, s] : requested) {
      if (seen.insert(id).second) next.push_back(std::move(s));
    }
    if (depth == max_depth || next.empty()) {
      result.beyond = depth == max_depth ? next.size() : 0;
      return result;
    }
    frontier = std::move(next);
  }
}

}  // namespace pfx::test
