#pragma once

/// \file
/// Decodes a fuzz input into protocol events for fuzz_machine. Random tokens almost never share a
/// prefix, so prompts and ids are mostly built from what the reference model holds (equal, extended,
/// cut, or diverging at a chosen point) over an alphabet of 1 to 4 letters; offsets are mostly the
/// granted one or 0, and sometimes one off or arbitrary; canonical_end falls at, below and past the
/// end; configure sometimes asks for chunk 0, huge chunks and huge keep_min. Refused events are as
/// much a part of the stream as accepted ones (INV-10).

#include "byte_reader.hpp"

#include <pfx/spec/model.hpp>
#include <pfx/spec/reference.hpp>

#include <algorithm>
#include <cstddef>
#include <limits>

namespace pfx::fuzz {

class MachineEventDecoder {
 public:
  /// The first byte chooses the alphabet: token values 0 .. alphabet - 1, alphabet in 1..4.
  explicit MachineEventDecoder(ByteReader& in) : in_(in), alphabet_(1 + in.below(4)) {}

  /// Remembers the prompt of an accepted begin: the commits that follow are mostly built from it, as
  /// a real lane commits its prompt plus what it generated.
  void writing(const spec::Tokens& prompt) { writing_prompt_ = prompt; }

  /// The next event, shaped by `model`, the reference state it will be applied to.
  spec::Event next(const spec::State& model) {
    switch (in_.below(16)) {
      case 0: case 1: case 2: return spec::Query{prompt_like(model.ids)};
      case 3: case 4: case 5: return begin(model);
      case 6: case 7: case 8: {
        spec::Tokens ids = prompt_like(writing_prompt_);
        return spec::Commit{ids, canonical_end(ids, writing_prompt_.size(), model.begin_offset)};
      }
      case 9: case 10: return spec::Abort{};
      case 11: case 12: {
        spec::Tokens ids = prompt_like(model.ids);
        return spec::Record{ids, canonical_end(ids, model.canonical_end, model.canonical_end)};
      }
      case 13: return spec::Clear{};
      default: return spec::Configure{config()};
    }
  }

 private:
  static constexpr std::size_t most = std::numeric_limits<std::size_t>::max();

  /// A begin at the granted offset, at 0, one off, or anywhere.
  spec::Event begin(const spec::State& model) {
    spec::Begin b{prompt_like(model.ids), 0};
    spec::State scratch = model;
    const std::size_t granted = spec::apply(scratch, spec::Query{b.prompt}).offset;
    switch (in_.below(6)) {
      case 0: b.offset = 0; break;
      case 1: case 2: b.offset = granted; break;
      case 3: b.offset = granted + 1; break;
      case 4: b.offset = granted == 0 ? 0 : granted - 1; break;
      default: b.offset = in_.byte(); break;
    }
    return b;
  }

  /// Tokens built from `base`: fresh, base itself plus a tail, a cut of base plus a tail, or a cut
  /// of base, one token that differs from base's next, and a tail.
  spec::Tokens prompt_like(const spec::Tokens& base) {
    spec::Tokens out;
    const std::size_t shape = in_.below(4);
    if (shape != 0) {
      const std::size_t cut = shape == 1 ? base.size() : in_.below(base.size() + 1);
      out.assign(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(std::min(cut, base.size())));
      if (shape == 3) out.push_back(cut < base.size() ? base[cut] + 1 : 0);
    }
    append_tail(out);
    return out;
  }

  /// Mostly 0..11 tokens; sometimes hundreds or thousands, to cross the block size of the
  /// run-time prefix compare.
  void append_tail(spec::Tokens& out) {
    const std::size_t scale = in_.byte();
    const std::size_t length = scale < 200 ? scale % 12 : (scale - 200) * 41;
    for (std::size_t i = 0; i < length; ++i) out.push_back(static_cast<spec::Token>(in_.below(alphabet_)));
  }

  /// At len(ids), at `natural`, one below `floor`, somewhere in [0, len(ids)], or past the end.
  std::size_t canonical_end(const spec::Tokens& ids, std::size_t natural, std::size_t floor) {
    switch (in_.below(6)) {
      case 0: case 1: return ids.size();
      case 2: return natural;
      case 3: return floor == 0 ? 0 : floor - 1;
      case 4: return in_.below(ids.size() + 1);
      default: return ids.size() + 1 + in_.below(2);
    }
  }

  spec::Config config() {
    spec::Config c;
    c.enabled = in_.below(6) != 0;
    const std::size_t keep_min = in_.below(8);
    c.keep_min = keep_min < 5 ? keep_min : keep_min == 5 ? 64 : keep_min == 6 ? 1024 : most - in_.below(2);
    const std::size_t chunk = in_.below(9);
    c.chunk = chunk < 6 ? chunk : chunk == 6 ? 16 : chunk == 7 ? 1024 : most;  // chunk 0 is refused
    return c;
  }

  ByteReader& in_;
  std::size_t alphabet_;
  spec::Tokens writing_prompt_;
};

}  // namespace pfx::fuzz
