#pragma once

/// \file
/// The bounded model checker: from the initial state, every event sequence over a finite alphabet of
/// events, up to a number of requests, with every abort, clear, configure and refused event in
/// between. On every reachable state it checks SAFE against the ghost (spec/ghost.hpp) for every
/// prompt of the domain, and on every step the machine's answer and state against the reference
/// model and every invariant of the catalogue. States are deduplicated, so the search ends and each
/// state is checked once, at the fewest requests it is reached with. It says whether the reachable
/// set is closed (one more request reaches nothing new: what it checked holds after any number of
/// requests), and counts per depth, so that a second search can show it explored all it claims
/// (proptest/core/model_checker_test.cpp).

#include <pfx/refinement/bridge.hpp>

#include <pfx/core.hpp>
#include <pfx/spec/catalogue.hpp>
#include <pfx/spec/ghost.hpp>
#include <pfx/spec/model.hpp>
#include <pfx/spec/reference.hpp>

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace pfx::refinement {

/// The checked domain. Prompts: every sequence over {0 .. alphabet-1} of length 0..max_prompt.
/// Requests: accepted begins and records, at most max_requests on any path. A commit reports
/// begun prompt + every sequence of 0..max_generated tokens, with every canonical_end 0..len(ids)+1,
/// and the begun prompt with any one token changed. Configurations: enabled or not, keep_min
/// 0..max_keep_min, chunk 0..max_chunk (0 is refused), and while enabled decode_rows_exact off and on.
struct ModelDomain {
  std::size_t alphabet = 2;
  std::size_t max_prompt = 4;
  std::size_t max_generated = 1;
  std::size_t max_requests = 5;
  std::size_t max_keep_min = 4;
  std::size_t max_chunk = 5;
};

/// The domain the test and `pfx audit` check (docs/spec.md argues why it is enough).
inline constexpr ModelDomain model_domain{};

/// What one judgment of the checker found: how many checks it failed, the first failure, and the
/// events that led to it from the initial state.
struct Finding {
  std::size_t count = 0;
  std::string what;               ///< "" when nothing failed
  std::vector<spec::Event> path;  ///< ends with the event (or the query) that failed
};

/// What the search saw at one depth: the states first reached with that many requests (the fewest
/// any path needs), the events applied to them, and the offers SAFE judged on them.
struct DepthCount {
  std::size_t states = 0;
  std::size_t transitions = 0;
  std::size_t offers = 0;
  std::size_t nonzero_offers = 0;
  friend constexpr bool operator==(const DepthCount&, const DepthCount&) = default;
};

/// What the search saw, and the first violation with the path that reached it.
struct ModelReport {
  std::size_t states = 0;          ///< distinct reachable states checked
  std::size_t transitions = 0;     ///< events applied (every one compared and checked)
  std::size_t offers = 0;          ///< (state, prompt) queries whose offer SAFE checked
  std::size_t nonzero_offers = 0;  ///< of which offered a non-zero offset
  std::size_t failed = 0;          ///< checks failed, all judgments together
  std::string violation;           ///< what failed first ("" when nothing did)
  std::vector<spec::Event> path;   ///< the events that led to it, from the initial state
  /// Each judgment on its own, so that a test can show which one catches a wrong machine: SAFE
  /// against the ghost; the machine's answer and state against the reference protocol; the
  /// catalogue's invariants on each step and offer.
  Finding safe;
  Finding reference;
  Finding invariant;
  /// The counts above by depth (the number of requests), 0..max_requests: their sums are the totals.
  std::vector<DepthCount> depths;
  /// True when no request from a state at the deepest level reaches a state not already checked: the
  /// reachable set of the domain is closed under every event of its alphabet, so what was checked
  /// holds after any number of requests, not only max_requests (docs/spec.md).
  bool closed = false;
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

template <class M>
struct Node {
  M machine;
  spec::Ghost ghost;
  std::size_t requests = 0;
  std::size_t parent = 0;  ///< index of the node it was reached from (the root is its own parent)
  spec::Event via{spec::Clear{}};
};

/// Writes a node's state as bytes, each token passed through `rename`.
struct KeyWriter {
  std::string key;
  spec::Token flip = 0;  ///< tokens are written as flip - t when flip != 0, else as they are

  void put(std::size_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void put(std::span<const token> t) {
    put(t.size());
    for (const token x : t) put(static_cast<std::size_t>(flip != 0 ? flip - x : x));
  }
};

template <refinement::MachineLike M>
std::string key_with(const M& m, const spec::Ghost& g, spec::Token flip) {
  KeyWriter w{{}, flip};
  w.key.reserve(512);
  w.put(m.config().enabled);
  w.put(m.config().keep_min);
  w.put(m.config().chunk);
  w.put(m.config().prefill_step);
  w.put(m.config().admission_padding);
  w.put(m.config().decode_rows_exact);
  w.put(std::span<const token>(m.held().ids));
  w.put(m.held().canonical_end);
  w.put(m.phase() == Phase::writing);
  w.put(m.begin_offset());
  w.put(m.begun());
  w.put(m.tainted());
  // A machine with state beyond what the bridge reads (a wrong machine that remembers a record
  // across a request) says so, so that two of its states the bridge cannot tell apart stay two.
  if constexpr (requires { m.hidden(); }) {
    w.put(std::span<const token>(m.hidden().ids));
    w.put(m.hidden().canonical_end);
  }
  w.put(g.grid);
  w.put(g.exact);
  w.put(g.writing);
  w.put(g.request);
  w.put(g.from_row);
  w.put(g.forgotten);
  w.put(g.rows.size());
  for (const spec::Row& r : g.rows) {
    w.put(static_cast<std::size_t>(r.origin));
    w.put(r.from);
    w.put(r.start);
    w.put(r.end);
    w.put(r.grid);
    w.put(r.cold_basis);
    w.put(r.exact);
  }
  return w.key;
}

/// The node's state as bytes: two nodes with the same key behave the same from here on. With two
/// letters, swapping them maps every event of the domain to another event of the domain and changes
/// no answer (the machine, the model and the ghost only compare tokens for equality), so a state and
/// its swapped image share one key: the lesser of the two.
template <refinement::MachineLike M>
std::string key_of(const M& m, const spec::Ghost& g, std::size_t alphabet) {
  std::string key = key_with(m, g, 0);
  if (alphabet == 2) key = std::min(key, key_with(m, g, 1));
  return key;
}

}  // namespace detail

/// Explores the domain and checks everything on the way. `M` is the machine checked: core's
/// Machine, or a deliberately wrong one (the tests show each judgment catches one). The search goes
/// depth by depth, a depth being the number of requests: it closes a depth under every event that is
/// not a request before it looks at the states one more request reaches, so each state is counted at
/// the fewest requests any path to it needs, whatever the order of the events (a second count can
/// then reproduce the figures per depth). A step the reference does not make is reported and its
/// state explored all the same, so that SAFE is judged on a wrong machine's own states.
template <refinement::MachineLike M = Machine>
ModelReport check_model(const ModelDomain& d) {
  ModelReport report;
  report.depths.resize(d.max_requests + 1);
  const std::vector<spec::Tokens> prompts = detail::sequences(d.alphabet, d.max_prompt);
  const std::vector<spec::Tokens> generated = detail::sequences(d.alphabet, d.max_generated);
  // keep_min is not consulted while reuse is off, and configure sets every knob at once: the
  // disabled configurations differ only in chunk (nothing is recorded while off, so whether decode
  // rows are exact is never consulted either). Chunk 0 is refused. Decode rows exact come with
  // keep_min 0 only: keep_min turns an offer into 0 and changes nothing else, so every begin of a
  // larger keep_min is one that keep_min 0 also accepts (at 0 or at the same offset), and every offer
  // SAFE judges under it is keep_min 0's or 0; and with chunks below max_prompt only, since a chunk
  // of max_prompt or more offers no row at all (one is always left to prefill).
  std::vector<spec::Config> configs;
  for (std::size_t c = 0; c <= d.max_chunk; ++c) {
    for (std::size_t k = 0; k <= d.max_keep_min; ++k) configs.push_back({true, k, c});
    if (c < d.max_prompt) configs.push_back({true, 0, c, 0, 0, true});
    configs.push_back({false, 0, c});
  }

  using Node = detail::Node<M>;
  std::vector<Node> nodes;
  std::unordered_set<std::string> seen;  // every state of the depths explored so far
  std::vector<std::size_t> level{0};     // the states of the depth being explored
  nodes.push_back({});
  seen.insert(detail::key_of(nodes[0].machine, nodes[0].ghost, d.alphabet));

  const auto path_to = [&](std::size_t index, const spec::Event& last) {
    std::vector<spec::Event> path{last};
    while (index != 0) {
      path.insert(path.begin(), nodes[index].via);
      index = nodes[index].parent;
    }
    return path;
  };
  const auto fail = [&](Finding& judgment, std::size_t index, const spec::Event& last, std::string what) {
    if (judgment.count++ == 0) {
      judgment.what = what;
      judgment.path = path_to(index, last);
    }
    if (report.failed++ == 0) {
      report.violation = std::move(what);
      report.path = path_to(index, last);
    }
  };

  for (std::size_t depth = 0; depth <= d.max_requests; ++depth) {
    DepthCount& count = report.depths[depth];
    // The states one more request reaches, by key: kept for the next depth unless this depth
    // reaches them too.
    std::vector<std::pair<std::string, Node>> next;
    std::unordered_set<std::string> next_keys;
    for (std::size_t at = 0; at < level.size(); ++at) {
      const std::size_t index = level[at];
      ++count.states;
      const M machine = nodes[index].machine;
      const spec::Ghost ghost = nodes[index].ghost;
      const spec::State state = refinement::to_spec(machine);

      // SAFE, and the rule's invariants, for every prompt asked of this state.
      if (!state.writing) {
        for (const spec::Tokens& prompt : prompts) {
          const spec::Event query = spec::Query{prompt};
          const Outcome out = machine.query(prompt);
          const spec::Output says = refinement::to_spec(out, query);
          const spec::Step step{state.config, state, query, says, state};
          ++count.offers;
          if (out.decision.offset != 0) ++count.nonzero_offers;
          if (!ghost.safe(prompt, out.decision.offset)) fail(report.safe, index, query, "SAFE");
          if (says != spec::reference_decision(state, prompt)) {
            fail(report.reference, index, query, "machine differs from the reference");
          }
          const std::string_view broken = spec::first_violation(step);
          if (!broken.empty()) fail(report.invariant, index, query, std::string(broken));
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
        // refinement::step_both, reusing the state before (already translated).
        ++count.transitions;
        M after_machine = machine;
        spec::State model = state;
        const spec::Output says = refinement::to_spec(after_machine.apply(refinement::to_core(event)), event);
        const spec::Output reference = spec::apply(model, event);
        const bool unchanged = after_machine == machine;
        const spec::State after = unchanged ? state : refinement::to_spec(after_machine);
        const spec::Step step{state.config, state, event, says, after};
        const std::string_view broken = spec::first_violation(step);
        if (says != reference || after != model) {
          fail(report.reference, index, event, "machine differs from the reference");
        }
        if (!broken.empty()) fail(report.invariant, index, event, std::string(broken));
        if (!says.accepted() && unchanged) continue;  // INV-10: the state is the one already seen
        spec::Ghost ghost_after = ghost;
        spec::follow(ghost_after, event, says.accepted());
        std::string key = detail::key_of(after_machine, ghost_after, d.alphabet);
        if (seen.contains(key)) continue;
        const bool request =
            says.accepted() && (std::holds_alternative<spec::Begin>(event) || std::holds_alternative<spec::Record>(event));
        Node node{std::move(after_machine), std::move(ghost_after), depth + (request ? 1 : 0), index, event};
        if (request) {
          if (next_keys.insert(key).second) next.emplace_back(std::move(key), std::move(node));
          continue;
        }
        seen.insert(std::move(key));
        nodes.push_back(std::move(node));
        level.push_back(nodes.size() - 1);
      }
    }
    // The depth is closed: what one more request reaches and this depth did not is the next depth.
    level.clear();
    if (depth == d.max_requests) {
      // Past the bound: the reachable set is closed when one more request reaches nothing new.
      report.closed = std::all_of(next.begin(), next.end(), [&](const auto& n) { return seen.contains(n.first); });
      break;
    }
    for (auto& [key, node] : next) {
      if (!seen.insert(key).second) continue;
      nodes.push_back(std::move(node));
      level.push_back(nodes.size() - 1);
    }
  }
  for (const DepthCount& c : report.depths) {
    report.states += c.states;
    report.transitions += c.transitions;
    report.offers += c.offers;
    report.nonzero_offers += c.nonzero_offers;
  }
  return report;
}

}  // namespace pfx::refinement
