#pragma once

/// \file
/// The DCP engines' attention checked against unsharded attention, for any DCP engine type (the
/// host's DcpReferenceEngine, the device's cuda::DcpReferenceEngineOnDevice) and a whole-state
/// reference engine of the same backend: the same prefill calls and decode steps run on the DCP
/// engine's single controller and on the whole-state engine, and the logits of every call and every
/// KV row written agree within dcp_tolerance. The resume properties (dcp_resume.hpp) compare the DCP
/// engine with itself, so a merge that weighs the ranks' partials wrongly would pass them alike.

#include "support/lanes.hpp"

#include <pfx/driver/engine.hpp>
#include <pfx/driver/kv_state.hpp>
#include <pfx/driver/shard_layout.hpp>
#include <pfx/engines/reference_model.hpp>

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iomanip>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <sstream>
#include <string>
#include <vector>

namespace pfx::test {

/// How far a DCP engine's logits and KV rows may be from the unsharded engine's, absolute, in fp32.
/// Both compute the same terms and differ only in how attention adds them (the ranks' partials
/// merged by log-sum-exp against one reduction over every row), by a few units in the last place of
/// each attention output, which the layers above carry into the rows and logits. docs/driver.md
/// ("The DCP engine against unsharded attention") derives it from the number of terms, the
/// magnitudes the reference weights give and the rounding of exp, log and the sums.
inline constexpr float dcp_tolerance = 1e-4F;

/// dcp_tolerance as a message prints it.
inline std::string dcp_tolerance_text() {
  std::ostringstream text;
  text << dcp_tolerance;
  return text.str();
}

/// The layouts compared: ranks {1, 2, 3, 4, 8} x interleave {1, 4, 16}.
inline const std::vector<std::size_t> dcp_ranks{1, 2, 3, 4, 8};
inline const std::vector<std::size_t> dcp_interleaves{1, 4, 16};

/// One comparison: the token of every position, the lengths of the prefill calls that cover the
/// first of them in order (the positions past them are decode steps, one each), on KV states of
/// `capacity` rows.
struct DcpCalls {
  std::vector<token> tokens;
  std::vector<std::size_t> chunks;
  std::size_t capacity = 0;

  [[nodiscard]] std::size_t prompt() const {
    std::size_t n = 0;
    for (const std::size_t c : chunks) n += c;
    return n;
  }
};

/// The largest difference between paired floats, and where it was. A NaN on either side is an
/// infinite difference: an engine that read a row nobody wrote (the states start as NaN) fails.
struct Difference {
  float size = 0.0F;
  std::string where;

  void add(float dcp, float whole, const std::string& place) {
    const float d = std::abs(dcp - whole);
    const float size_now = std::isnan(d) ? std::numeric_limits<float>::infinity() : d;
    if (where.empty() || size_now > size) {
      size = size_now;
      std::ostringstream text;
      text << std::setprecision(9) << place << ": " << dcp << " against " << whole;
      where = text.str();
    }
  }
  /// Keeps the larger of the two.
  void add(const Difference& other) {
    if (where.empty() || other.size > size) *this = other;
  }
};

/// The largest differences of one or more comparisons: of the logits of every call, of the rows by
/// layer, and the largest magnitude of a float compared.
struct Differences {
  Difference logits;
  std::vector<Difference> rows_by_layer;
  float largest_magnitude = 0.0F;

  [[nodiscard]] Difference rows() const {
    Difference all;
    for (const Difference& d : rows_by_layer) all.add(d);
    return all;
  }
  [[nodiscard]] bool within(float tolerance) const { return logits.size <= tolerance && rows().size <= tolerance; }

  void add(const Differences& other) {
    logits.add(other.logits);
    rows_by_layer.resize(std::max(rows_by_layer.size(), other.rows_by_layer.size()));
    for (std::size_t l = 0; l < other.rows_by_layer.size(); ++l) rows_by_layer[l].add(other.rows_by_layer[l]);
    largest_magnitude = std::max(largest_magnitude, other.largest_magnitude);
  }

  /// One line per kind: the logits, the rows of each layer.
  [[nodiscard]] std::string text() const {
    std::ostringstream out;
    out << "  logits: " << logits.size << " (" << logits.where << ")\n";
    for (std::size_t l = 0; l < rows_by_layer.size(); ++l) {
      out << "  rows of layer " << l << ": " << rows_by_layer[l].size << " (" << rows_by_layer[l].where << ")\n";
    }
    out << "  the largest |float| compared: " << largest_magnitude << "\n";
    return out.str();
  }
};

/// Runs `calls` on `dcp` and on `whole`, each on a KV state of its own, and measures how far apart
/// they are: the logits of every prefill call and decode step, then rows [0, tokens.size()) as each
/// state's copy_rows reads them (KvState's layout: per layer its key rows, then its value rows).
inline Differences dcp_differences(driver::Engine& dcp, driver::Engine& whole, const engines::ReferenceModelShape& shape,
                                   const DcpCalls& calls) {
  const std::unique_ptr<driver::KvState> dcp_kv = dcp.make_kv_state(calls.capacity);
  const std::unique_ptr<driver::KvState> whole_kv = whole.make_kv_state(calls.capacity);
  std::vector<float> dcp_logits(shape.vocab);
  std::vector<float> whole_logits(shape.vocab);
  Differences out;
  const auto magnitude = [&](float x) { out.largest_magnitude = std::max(out.largest_magnitude, std::abs(x)); };
  const auto compare_logits = [&](const std::string& call) {
    for (std::size_t t = 0; t < shape.vocab; ++t) {
      out.logits.add(dcp_logits[t], whole_logits[t], "logit " + std::to_string(t) + " of " + call);
      magnitude(whole_logits[t]);
    }
  };
  std::size_t position = 0;
  for (const std::size_t n : calls.chunks) {
    const std::span<const token> chunk(calls.tokens.data() + position, n);
    dcp.prefill(*dcp_kv, chunk, position, dcp_logits);
    whole.prefill(*whole_kv, chunk, position, whole_logits);
    compare_logits("the prefill of [" + std::to_string(position) + ", " + std::to_string(position + n) + ")");
    position += n;
  }
  for (; position < calls.tokens.size(); ++position) {
    dcp.decode(*dcp_kv, calls.tokens[position], position, dcp_logits);
    whole.decode(*whole_kv, calls.tokens[position], position, whole_logits);
    compare_logits("the decode step at " + std::to_string(position));
  }
  const std::size_t rows = calls.tokens.size();
  const std::vector<float> dcp_rows = dcp_kv->copy_rows(0, rows);
  const std::vector<float> whole_rows = whole_kv->copy_rows(0, rows);
  if (dcp_rows.size() != shape.layers * 2 * rows * shape.width || whole_rows.size() != dcp_rows.size()) {
    throw std::logic_error("the KV states read back " + std::to_string(dcp_rows.size()) + " and " +
                           std::to_string(whole_rows.size()) + " floats for " + std::to_string(rows) + " rows");
  }
  out.rows_by_layer.resize(shape.layers);
  for (std::size_t i = 0; i < dcp_rows.size(); ++i) {
    const std::size_t row = i / shape.width;  // [layer][plane][position]
    const std::size_t p = row % rows;
    const bool key = row / rows % 2 == 0;
    const std::size_t layer = row / rows / 2;
    out.rows_by_layer[layer].add(dcp_rows[i], whole_rows[i],
                                 std::string(key ? "key" : "value") + " row " + std::to_string(p) + " [" +
                                     std::to_string(i % shape.width) + "]");
    magnitude(whole_rows[i]);
  }
  return out;
}

/// `prompt` positions cut into prefill calls of `chunk` positions from 0, the last shorter, as a
/// cold run cuts them.
inline std::vector<std::size_t> grid_calls(std::size_t prompt, std::size_t chunk) {
  std::vector<std::size_t> lengths;
  for (std::size_t left = prompt; left > 0; left -= lengths.back()) lengths.push_back(std::min(left, chunk));
  return lengths;
}

/// `prompt` positions cut into prefill calls of 1 .. 2 x `chunk` positions, drawn (inside a property).
inline std::vector<std::size_t> drawn_calls(std::size_t prompt, std::size_t chunk) {
  std::vector<std::size_t> lengths;
  for (std::size_t left = prompt; left > 0; left -= lengths.back()) {
    lengths.push_back(std::min(left, *rc::gen::inRange<std::size_t>(1, 2 * chunk + 1)));
  }
  return lengths;
}

/// Totals of rows that put a rank of `layout` at an edge: (ranks - 1) x interleave leaves the last
/// rank no row, one more gives it a single row; ranks x interleave - 1 leaves the last block one
/// short. None is longer than the layout's cycle. Totals of 0 are left out.
inline std::vector<std::size_t> dcp_edge_totals(const driver::ShardLayout& layout) {
  std::vector<std::size_t> totals;
  for (const std::size_t t : {(layout.ranks - 1) * layout.interleave, (layout.ranks - 1) * layout.interleave + 1,
                              layout.ranks * layout.interleave - 1}) {
    if (t > 0) totals.push_back(t);
  }
  return totals;
}

/// Whether some rank of `layout` holds no row, or exactly one, of positions [0, rows).
inline bool a_rank_holds(const driver::ShardLayout& layout, std::size_t rows, std::size_t held) {
  for (std::size_t r = 0; r < layout.ranks; ++r) {
    if (layout.local_len(rows, r) == held) return true;
  }
  return false;
}

/// The property, for one drawn model shape, layout of dcp_ranks x dcp_interleaves, token count (any
/// of 1 .. 200, or an edge total of the layout), cut into prefill calls of drawn lengths and up to
/// 8 decode steps, on a state of exactly those rows or a few or many more. Adds its differences to
/// `seen`.
template <class Dcp, class Whole>
void dcp_logits_and_rows_are_unsharded_within_tolerance(Differences& seen) {
  const engines::ReferenceModelShape shape = *model_shapes();
  const driver::ShardLayout layout{*rc::gen::elementOf(dcp_ranks), *rc::gen::elementOf(dcp_interleaves)};
  const std::size_t rows =
      *rc::gen::oneOf(rc::gen::inRange<std::size_t>(1, 201), rc::gen::elementOf(dcp_edge_totals(layout)));
  const std::size_t decodes = *rc::gen::inRange<std::size_t>(0, std::min<std::size_t>(rows, 9));
  DcpCalls calls;
  calls.tokens = *rc::gen::container<std::vector<token>>(rows, rc::gen::inRange<token>(0, static_cast<token>(shape.vocab)));
  calls.chunks = drawn_calls(rows - decodes, shape.chunk);
  calls.capacity = rows + *rc::gen::oneOf(rc::gen::just<std::size_t>(0), rc::gen::inRange<std::size_t>(1, 4),
                                          rc::gen::inRange<std::size_t>(4, 65));

  Dcp dcp(shape, layout);
  Whole whole(shape);
  const Differences differences = dcp_differences(dcp, whole, shape, calls);
  seen.add(differences);
  if (!differences.within(dcp_tolerance)) {
    RC_FAIL("the DCP engine of " + std::to_string(layout.ranks) + " ranks x interleave " +
            std::to_string(layout.interleave) + " is more than " + dcp_tolerance_text() +
            " from the unsharded engine; its largest differences:\n" + differences.text());
  }
  RC_CLASSIFY(a_rank_holds(layout, rows, 0), "a rank holds no row");
  RC_CLASSIFY(a_rank_holds(layout, rows, 1), "a rank holds a single row");
  RC_CLASSIFY(calls.prompt() < layout.ranks * layout.interleave, "ranks x interleave exceed the prompt");
  RC_CLASSIFY(rows == calls.capacity, "the last row is the state's last");
  RC_CLASSIFY(decodes > 0, "decode steps");
}

/// What a test prints after its cases, the figures of docs/driver.md: the largest differences it saw.
inline void print_largest(const Differences& seen) {
  std::cout << "the largest differences from the unsharded engine (tolerance " << dcp_tolerance_text() << "):\n"
            << seen.text();
}

/// The property run by RapidCheck as a gtest test's body; prints the largest differences of its cases.
template <class Dcp, class Whole>
void check_dcp_logits_and_rows_against_unsharded() {
  Differences seen;
  EXPECT_TRUE(rc::check("the DCP engine's logits and rows are the unsharded engine's within the tolerance",
                        [&] { dcp_logits_and_rows_are_unsharded_within_tolerance<Dcp, Whole>(seen); }));
  print_largest(seen);
}

/// The edges of every layout of dcp_ranks x dcp_interleaves, on the default model: a rank with no
/// row, a rank with a single row (both with a prompt shorter than ranks x interleave), and two
/// cycles and a half block written up to the state's last row, its last rows by decode steps. Each
/// case is checked to be the edge it names. Prints the largest differences of the cases, the same
/// on every run.
template <class Dcp, class Whole>
void check_dcp_edges_against_unsharded() {
  Differences seen;
  const engines::ReferenceModelShape shape{};
  std::mt19937_64 random(2024);
  for (const std::size_t ranks : dcp_ranks) {
    for (const std::size_t interleave : dcp_interleaves) {
      const driver::ShardLayout layout{ranks, interleave};
      const std::size_t cycle = ranks * interleave;
      struct Edge {
        const char* name;
        std::size_t rows;
        std::size_t decodes;
        std::optional<std::size_t> last_rank_holds;  ///< rows, where the edge is the last rank's
      };
      std::vector<Edge> edges;
      if (ranks > 1) edges.push_back({"the last rank holds no row", (ranks - 1) * interleave, 1, 0});
      edges.push_back({"the last rank holds a single row", (ranks - 1) * interleave + 1, 1, 1});
      edges.push_back({"rows up to the state's last", 2 * cycle + interleave / 2 + 3, 3, std::nullopt});
      for (const Edge& edge : edges) {
        const std::string name = std::to_string(ranks) + " ranks x interleave " + std::to_string(interleave) +
                                 ", " + edge.name + " (" + std::to_string(edge.rows) + " rows)";
        const std::size_t decodes = std::min(edge.decodes, edge.rows - 1);
        DcpCalls calls{random_tokens(random, edge.rows, shape.vocab), grid_calls(edge.rows - decodes, shape.chunk),
                       edge.rows};
        // Each case is the edge it names.
        if (edge.last_rank_holds.has_value()) {
          EXPECT_EQ(layout.local_len(edge.rows, ranks - 1), *edge.last_rank_holds) << name;
          EXPECT_LE(calls.prompt(), cycle) << name;
        }
        Dcp dcp(shape, layout);
        Whole whole(shape);
        const Differences differences = dcp_differences(dcp, whole, shape, calls);
        seen.add(differences);
        EXPECT_TRUE(differences.within(dcp_tolerance))
            << name << ": more than " << dcp_tolerance_text() << " from the unsharded engine:\n"
            << differences.text();
      }
    }
  }
  print_largest(seen);
}

}  // namespace pfx::test
