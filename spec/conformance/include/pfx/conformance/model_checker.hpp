#pragma once

/// \file
/// The bounded model checker: from the initial state, every event sequence over a finite alphabet of
/// events, up to a number of requests, with every abort, clear, configure and refused event in
/// between. On every reachable state it checks SAFE against the ghost (spec/ghost.hpp) for every
/// prompt of the domain, and on every step the machine's answer and state against the reference
/// model and every invariant of the catalogue. States are deduplicated, so the search ends and each
/// state is checked once, at the fewest requests it is reached with.

#include <pfx/conformance/bridge.hpp>

#include <pfx/core.hpp>
#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/ghost.hpp>
#include <pfx/spec/model.hpp>
#include <pfx/spec/reference.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace pfx::proof {

/// The checked domain. Prompts: every sequence over {0 .. alphabet-1} of length 0..max_prompt.
/// Requests: accepted begins and records, at most max_requests on any path. A commit reports
/// begun prompt + every sequence of 0..max_generated tokens, with every canonical_end 0..len(ids)+1,
/// and the begun prompt with any one token changed. Configurations: enabled or not, keep_min
/// 0..max_keep_min, chunk 0..max_chunk (0 is refused).
struct ModelDomain {
  std::size_t alphabet = 2;
  std::size_t max_prompt = 4;
  std::size_t max_generated = 1;
  std::size_t max_requests = 3;
  std::size_t max_keep_min = 4;
  std::size_t max_chunk = 5;
};

/// The domain the test and `pfx audit` check (docs/spec.md argues why it is enough).
inline constexpr ModelDomain model_domain{};

/// What the search saw, and the first violation with the path that reached it.
struct ModelReport {
  std::size_t states = 0;          ///< distinct reachable states checked
  std::size_t transitions = 0;     ///< events applied (every one compared and checked)
  std::size_t offers = 0;          ///< (state, prompt) queries whose offer SAFE checked
  std::size_t nonzero_offers = 0;  ///< of which offered a non-zero offset
  std::size_t failed = 0;
  std::string violation;           ///< what failed first ("" when nothing did)
  std::vector<spec::Event> path;   ///< the events that led to it, from the initial state
};

namespace detail {

/// Every sequence over {0 .. alphabet-1} of length 0..max_length, shortest first.
inline std::vector<spec::Tokens> sequences(std::size_t alphabet, std::size_t max_length) {
  std::vector<spec::Tokens> all{spec::Tokens{}};
  std::size_t begin = 0;
  for (std::size_t length = 1; length <= max_length; ++length) {
    const std::size_t end = all.size();
    for (std::size_t i = begin; i < end; ++i) {
      for (std::size_t t = 0; t < alphabet; ++t) {
        spec::Tokens s = all[i];
        s.push_back(static_cast<spec::Token>(t));
        all.push_back(s);
      }
    }
    begin = end;
  }
  return all;
}

struct Node {
  Machine machine;
  spec::Ghost ghost;
  std::size_t requests = 0;
  std::size_t parent = 0;  ///< index of the node it was reached from (the root is its own parent)
  spec::Event via{spec::Clear{}};
};

inline void put(std::string& key, std::size_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); }
inline void put(std::string& key, const spec::Tokens& t) {
  put(key, t.size());
  for (const spec::Token x : t) put(key, static_cast<std::size_t>(x));
}

/// The node's state as bytes: two nodes with the same key behave the same from here on.
inline void put(std::string& key, std::span<const token> t) {
  put(key, t.size());
  for (const token x : t) put(key, static_cast<std::size_t>(x));
}
inline std::string key_of(const Machine& m, const spec::Ghost& g) {
  std::string key;
  key.reserve(512);
  put(key, m.config().enabled);
  put(key, m.config().keep_min);
  put(key, m.config().chunk);
  put(key, std::span<const token>(m.held().ids));
  put(key, m.held().canonical_end);
  put(key, m.phase() == Phase::writing);
  put(key, m.begin_offset());
  put(key, m.begun());
  put(key, m.tainted());
  put(key, g.grid);
  put(key, g.writing);
  put(key, g.request);
  put(key, g.from_row);
  put(key, g.forgotten);
  put(key, g.rows.size());
  for (const spec::Row& r : g.rows) {
    put(key, static_cast<std::size_t>(r.origin));
    put(key, r.from);
    put(key, r.start);
    put(key, r.end);
    put(key, r.grid);
    put(key, r.cold_basis);
  }
  return key;
}

}  // namespace detail

/// Explores the domain and checks everything on the way.
inline ModelReport check_model(const ModelDomain& d) {
  ModelReport report;
  const std::vector<spec::Tokens> prompts = detail::sequences(d.alphabet, d.max_prompt);
  const std::vector<spec::Tokens> generated = detail::sequences(d.alphabet, d.max_generated);
  // keep_min is not consulted while reuse is off, and configure sets every knob at once: the
  // disabled configurations differ only in chunk. Chunk 0 is refused.
  std::vector<spec::Config> configs;
  for (std::size_t c = 0; c <= d.max_chunk; ++c) {
    for (std::size_t k = 0; k <= d.max_keep_min; ++k) configs.push_back({true, k, c});
    configs.push_back({false, 0, c});
  }

  std::vector<detail::Node> nodes;
  std::unordered_set<std::string> seen;
  std::vector<std::vector<std::size_t>> levels(d.max_requests + 1);
  nodes.push_back({});
  seen.insert(detail::key_of(nodes[0].machine, nodes[0].ghost));
  levels[0].push_back(0);

  const auto path_to = [&](std::size_t index, const spec::Event& last) {
    std::vector<spec::Event> path{last};
    while (index != 0) {
      path.insert(path.begin(), nodes[index].via);
      index = nodes[index].parent;
    }
    return path;
  };
  const auto fail = [&](std::size_t index, const spec::Event& last, std::string what) {
    if (report.failed++ == 0) {
      report.violation = std::move(what);
      report.path = path_to(index, last);
    }
  };

  for (std::size_t level = 0; level <= d.max_requests; ++level) {
    for (std::size_t at = 0; at < levels[level].size(); ++at) {
      const std::size_t index = levels[level][at];
      ++report.states;
      const Machine machine = nodes[index].machine;
      const spec::Ghost ghost = nodes[index].ghost;
      const spec::State state = bridge::to_spec(machine);

      // SAFE, and the rule's invariants, for every prompt asked of this state.
      if (!state.writing) {
        for (const spec::Tokens& prompt : prompts) {
          const spec::Event query = spec::Query{prompt};
          const Outcome out = machine.query(prompt);
          const spec::Output says = bridge::to_spec(out, query);
          const spec::Step step{state.config, state, query, says, state};
          ++report.offers;
          if (out.decision.offset != 0) ++report.nonzero_offers;
          if (!ghost.safe(prompt, out.decision.offset)) fail(index, query, "SAFE");
          if (says != spec::reference_decision(state, prompt)) fail(index, query, "reference");
          const std::string_view broken = spec::first_violation(step);
          if (!broken.empty()) fail(index, query, std::string(broken));
        }
      }

      std::vector<spec::Event> events{spec::Clear{}, spec::Abort{}};
      if (!state.writing) {
        for (const spec::Tokens& prompt : prompts) {
          const std::size_t granted = spec::reference_offset(state, prompt);
          events.push_back(spec::Begin{prompt, 0});
          if (granted != 0) events.push_back(spec::Begin{prompt, granted});
          events.push_back(spec::Begin{prompt, granted + 1});  // refused
          for (std::size_t end = prompt.empty() ? 0 : prompt.size() - 1; end <= prompt.size(); ++end) {
            events.push_back(spec::Record{prompt, end});
          }
        }
        events.push_back(spec::Record{prompts.back(), prompts.back().size() + 1});  // refused
        for (const spec::Config& c : configs) events.push_back(spec::Configure{c});
        events.push_back(spec::Commit{spec::Tokens{}, 0});
      } else {
        for (const spec::Tokens& tail : generated) {
          spec::Tokens ids = state.begun;
          ids.insert(ids.end(), tail.begin(), tail.end());
          for (std::size_t end = 0; end <= ids.size() + 1; ++end) events.push_back(spec::Commit{ids, end});
        }
        for (std::size_t i = 0; i < state.begun.size(); ++i) {
          spec::Tokens broken = state.begun;
          broken[i] = static_cast<spec::Token>((static_cast<std::size_t>(broken[i]) + 1) % d.alphabet);
          events.push_back(spec::Commit{broken, broken.size()});
        }
        if (!state.begun.empty()) {
          spec::Tokens shorter(state.begun.begin(), state.begun.end() - 1);
          events.push_back(spec::Commit{shorter, shorter.size()});
        }
        events.push_back(spec::Query{state.begun});
        events.push_back(spec::Begin{state.begun, 0});
        events.push_back(spec::Record{state.begun, 0});
        events.push_back(spec::Configure{state.config});
      }

      for (const spec::Event& event : events) {
        // bridge::step_both, reusing the state before (already translated).
        ++report.transitions;
        Machine next = machine;
        spec::State model = state;
        const spec::Output says = bridge::to_spec(next.apply(bridge::to_core(event)), event);
        const spec::Output reference = spec::apply(model, event);
        const bool unchanged = next == machine;
        const spec::State after = unchanged ? state : bridge::to_spec(next);
        const spec::Step step{state.config, state, event, says, after};
        const std::string_view broken = spec::first_violation(step);
        if (says != reference || after != model || !broken.empty()) {
          fail(index, event, broken.empty() ? std::string("machine differs from the reference")
                                            : std::string(broken));
          continue;
        }
        if (!says.accepted()) continue;  // INV-10 held: the state is the one already seen
        spec::Ghost ghost_after = ghost;
        spec::follow(ghost_after, event, true);
        const bool request =
            std::holds_alternative<spec::Begin>(event) || std::holds_alternative<spec::Record>(event);
        const std::size_t requests = nodes[index].requests + (request ? 1 : 0);
        if (requests > d.max_requests) continue;
        if (!seen.insert(detail::key_of(next, ghost_after)).second) continue;
        nodes.push_back({std::move(next), std::move(ghost_after), requests, index, event});
        levels[requests].push_back(nodes.size() - 1);
      }
    }
  }
  return report;
}

}  // namespace pfx::proof
