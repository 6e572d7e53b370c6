#pragma once

/// \file
/// The reference model's vocabulary as one-line text: the one describe() of the counterexamples that
/// `pfx audit`, the fuzzers and the property tests print.

#include <pfx/spec/model.hpp>

#include <cstddef>
#include <sstream>
#include <string>
#include <variant>

namespace pfx::refinement {

/// "[0,1,1]"; long sequences show their first 48 tokens and their length.
inline std::string describe(const spec::Tokens& tokens) {
  constexpr std::size_t shown = 48;
  std::ostringstream out;
  out << '[';
  for (std::size_t i = 0; i < tokens.size() && i < shown; ++i) out << (i > 0 ? "," : "") << tokens[i];
  if (tokens.size() > shown) out << ",... (" << tokens.size() << " tokens)";
  out << ']';
  return out.str();
}

/// "enabled keep_min 4 chunk 2", and " prefill_step 3" and " admission_padding 1" when there are.
inline std::string describe(const spec::Config& c) {
  std::ostringstream out;
  out << (c.enabled ? "enabled" : "disabled") << " keep_min " << c.keep_min << " chunk " << c.chunk;
  if (c.prefill_step != 0) out << " prefill_step " << c.prefill_step;  // 0: no premise, as ever
  if (c.admission_padding != 0) out << " admission_padding " << c.admission_padding;  // 0: as ever
  if (c.decode_rows_exact) out << " decode_rows_exact";  // off: INV-2 as ever
  return out.str();
}

inline std::string describe(const spec::Event& event) {
  std::ostringstream out;
  struct Visitor {
    std::ostringstream& out;
    void operator()(const spec::Query& e) const { out << "query prompt=" << describe(e.prompt); }
    void operator()(const spec::Begin& e) const {
      out << "begin prompt=" << describe(e.prompt) << " offset=" << e.offset;
    }
    void operator()(const spec::Commit& e) const {
      out << "commit ids=" << describe(e.ids) << " canonical_end=" << e.canonical_end;
    }
    void operator()(const spec::Abort&) const { out << "abort"; }
    void operator()(const spec::Record& e) const {
      out << "record ids=" << describe(e.ids) << " canonical_end=" << e.canonical_end;
    }
    void operator()(const spec::Clear&) const { out << "clear"; }
    void operator()(const spec::Configure& e) const { out << "configure " << describe(e.config); }
  };
  std::visit(Visitor{out}, event);
  return out.str();
}

inline std::string describe(const spec::State& s) {
  std::ostringstream out;
  out << describe(s.config) << "; ids=" << describe(s.ids) << " canonical_end " << s.canonical_end;
  if (s.writing) {
    out << "; writing from " << s.begin_offset;
  } else {
    out << "; idle";
  }
  return out.str();
}

/// "offset 2, common prefix 3, reason reused, bound common prefix", "accepted" or "refused: writing".
inline std::string describe(const spec::Output& o) {
  if (!o.accepted()) return "refused: " + std::string(o.refusal);
  if (!o.has_decision) return "accepted";
  std::ostringstream out;
  out << "offset " << o.offset << ", common prefix " << o.common_prefix << ", reason " << o.reason << ", bound "
      << o.bound;
  return out.str();
}

}  // namespace pfx::refinement
